package engine

import "math"

// noExpiry marks a message that never expires.
const noExpiry = math.MaxInt64

type messageState uint8

const (
	stateAvailable messageState = iota + 1
	stateLocked
	stateDeferred
	stateScheduled
	// stateTransfer: on its way to the entity's forwarding target (see
	// transfer.go), in no index but the queue's log.
	stateTransfer
)

type lockToken [16]byte

// message is one stored message, kept compact: the body and message id as
// sent, the other fields of raftbus.v1.Message encoded in meta (nil when
// there are none), and the broker's bookkeeping.
type message struct {
	seq int64
	// order is the position of seq among all numbers the partition handed
	// out. It orders messages even when the sequence counter rolls over.
	order      uint64
	enqueuedMs int64
	// expiresMs is when the message expires (noExpiry: never). While the
	// message is scheduled it holds the time to live instead, applied from
	// activation.
	expiresMs int64
	// dueMs is the lock expiry of a locked message and the activation time
	// of a scheduled one.
	dueMs int64
	id    string
	// body is the body, unless ref says where it lies on disk.
	body          []byte
	ref           BodyRef
	meta          []byte
	deadLetter    *deadLetterInfo
	token         lockToken
	deliveryCount int32
	timerIdx      int32
	expiryIdx     int32
	state         messageState
	// lockedFromDeferred: a message received by sequence number returns to
	// the deferred state when its lock ends without settlement.
	lockedFromDeferred bool
	// underSessionLock: the message was locked under its session's lock,
	// which covers it: it has no expiry of its own (dueMs follows the
	// session's) and is released with the session.
	underSessionLock bool
	// sessionActive: the message is in its session's processing order
	// (its session is found through queue.sessions: a pointer here would
	// take the struct to the next size class).
	sessionActive bool
}

// deadLetterInfo is what a dead-lettered message carries besides the message.
type deadLetterInfo struct {
	reason, description, source string
	enqueuedSeq                 int64
	// origin is the order the message had before it was dead-lettered: in
	// a subscription, that of the topic message it is a copy of.
	origin uint64
}

func (m *message) size() int64 { return int64(len(m.id)+len(m.meta)) + m.bodyLen() }

// bodyLen is the size of the body, wherever it is.
func (m *message) bodyLen() int64 { return int64(len(m.body)) + int64(m.ref.Length) }

func bySeq(a, b *message) bool   { return a.seq < b.seq }
func byOrder(a, b *message) bool { return a.order < b.order }

const btreeDegree = 64

// queue is an ordered store of messages with the Service Bus states:
// available, locked, deferred and scheduled. An entity's main queue and its
// dead-letter sub-queue are both queues; a subscription will be one too.
// Every structure is an index over the same message structs, and every
// operation is O(log n) or amortized O(1).
//
// Available messages are either fresh (never delivered, or dead-lettered
// or activated: appended in order) or returned (their lock ended without
// settlement: a heap by order). A receive takes the lower of the two heads,
// so a returned message goes out again in its original place in the order.
type queue struct {
	entity *entity
	// deadLetter marks the dead-letter sub-queue: time to live and
	// MaxDeliveryCount are not applied there, nor can messages be
	// dead-lettered from it.
	deadLetter bool
	all        messageLog // every message
	fresh      messageLog // available messages appended in order
	returned   indexedHeap[*message, returnedKey]
	timers     indexedHeap[*message, timerKey]
	expiries   indexedHeap[*message, expiryKey]
	locks      map[lockToken]*message
	// pins counts the body references of the partition (shared by its
	// queues and receipts).
	pins *bodyPins
	// sessions indexes the messages by session in the main queue of an
	// entity that requires sessions; nil otherwise.
	sessions *sessionIndex

	availableCount, lockedCount, deferredCount, scheduledCount int64
	transferCount                                              int64
	bytes                                                      int64
}

func newQueue(ent *entity, deadLetter bool, pins *bodyPins) *queue {
	return &queue{
		entity:     ent,
		deadLetter: deadLetter,
		locks:      make(map[lockToken]*message),
		pins:       pins,
	}
}

func (q *queue) count() int64 {
	return q.availableCount + q.lockedCount + q.deferredCount + q.scheduledCount
}

// nextAvailable is the available message with the lowest order, or nil.
func (q *queue) nextAvailable() *message {
	f, r := q.fresh.first(), q.returned.top()
	if f == nil || (r != nil && r.order < f.order) {
		return r
	}
	return f
}

// insert stores m in the state m.state.
func (q *queue) insert(m *message) {
	m.timerIdx, m.expiryIdx = -1, -1
	q.all.insert(m)
	q.pins.add(m.ref)
	q.bytes += m.size()
	if t := q.topicOf(); t != nil {
		t.share(m)
	}
	if q.sessions != nil && m.state != stateTransfer {
		q.sessions.inserted(m)
	}
	if !q.deadLetter && m.state != stateScheduled && m.state != stateTransfer && m.expiresMs != noExpiry {
		q.expiries.push(m)
	}
	q.attach(m)
}

// remove deletes m from the queue, whatever its state.
func (q *queue) remove(m *message) {
	q.detach(m)
	q.expiries.remove(m)
	q.all.remove(m)
	q.pins.remove(m.ref)
	q.bytes -= m.size()
	if t := q.topicOf(); t != nil {
		t.unshare(m)
	}
	if q.sessions != nil && m.state != stateTransfer {
		q.sessions.removed(m)
	}
}

// attach adds m to the index of its state.
func (q *queue) attach(m *message) {
	switch m.state {
	case stateAvailable:
		if m.order > q.fresh.lastOrder() {
			q.fresh.append(m)
		} else {
			q.returned.push(m)
		}
		q.availableCount++
	case stateLocked:
		q.locks[m.token] = m
		if !m.underSessionLock {
			q.timers.push(m)
		}
		q.lockedCount++
	case stateDeferred:
		q.deferredCount++
	case stateScheduled:
		q.timers.push(m)
		q.scheduledCount++
	case stateTransfer:
		q.transferCount++
		return
	}
	if q.sessions != nil {
		q.sessions.attached(m)
	}
}

// detach removes m from the index of its state.
func (q *queue) detach(m *message) {
	if q.sessions != nil && m.state != stateTransfer {
		q.sessions.detached(m)
	}
	switch m.state {
	case stateAvailable:
		if m.timerIdx >= 0 {
			q.returned.remove(m)
		} else {
			q.fresh.remove(m)
		}
		q.availableCount--
	case stateLocked:
		delete(q.locks, m.token)
		q.timers.remove(m)
		m.token = lockToken{}
		m.lockedFromDeferred, m.underSessionLock = false, false
		q.lockedCount--
	case stateDeferred:
		q.deferredCount--
	case stateScheduled:
		q.timers.remove(m)
		q.scheduledCount--
	case stateTransfer:
		q.transferCount--
	}
}

// move changes m's state within the queue.
func (q *queue) move(m *message, to messageState) {
	q.detach(m)
	m.state = to
	q.attach(m)
}

// lock hands m to a PeekLock receiver until lockedUntil, or, when
// underSession, for as long as the lock of its session is held (which
// ends at lockedUntil unless renewed).
func (q *queue) lock(m *message, token lockToken, lockedUntil int64, underSession bool) {
	fromDeferred := m.state == stateDeferred
	q.detach(m)
	m.state = stateLocked
	m.token = token
	m.dueMs = lockedUntil
	m.lockedFromDeferred = fromDeferred
	m.underSessionLock = underSession
	m.deliveryCount++
	q.attach(m)
}

// renew moves m's lock expiry.
func (q *queue) renew(m *message, lockedUntil int64) {
	m.dueMs = lockedUntil
	q.timers.changed(m)
}

// nextEvent is the earliest time-driven work of the queue.
func (q *queue) nextEvent() (int64, bool) {
	t, ok := int64(0), false
	if m := q.timers.top(); m != nil {
		t, ok = m.dueMs, true
	}
	if m := q.expiries.top(); m != nil && (!ok || m.expiresMs < t) {
		t, ok = m.expiresMs, true
	}
	if q.sessions != nil {
		if st, has := q.sessions.nextEvent(); has && (!ok || st < t) {
			t, ok = st, true
		}
	}
	return t, ok
}

// setProperties replaces m's encoded fields, keeping the byte count exact.
func (q *queue) setMeta(m *message, meta []byte) {
	q.bytes -= m.size()
	if t := q.topicOf(); t != nil {
		t.held += int64(len(meta) - len(m.meta))
	}
	m.meta = meta
	q.bytes += m.size()
}
