package engine

import (
	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Receipts make receives idempotent. A receiver whose answer was lost (the
// connection broke after the request left) cannot know whether its receive
// took effect; if it simply asked again, the first receive's messages would
// stay locked, unseen, until their locks expired, their delivery counts
// raised for nothing (under repeated faults up to MaxDeliveryCount and the
// dead-letter queue), and in ReceiveAndDelete mode they would be gone. So a
// receive carries a receive id chosen by the receiver and kept by its
// repeats, and the engine keeps, for a while, a receipt of what each
// receive id received: a repeat gets the same messages back instead of new
// ones.
const (
	// minReceiptWindow is the shortest time a receipt is kept; otherwise
	// it is kept for the entity's lock duration (after which a PeekLock
	// receipt holds nothing any more).
	minReceiptWindow = 30_000 // ms
	// maxReceiptWeight bounds the messages the receipts of one partition
	// refer to (an empty receipt counts as one), and maxReceiptBytes the
	// size of the removed messages they hold. Beyond either the oldest
	// receipts are forgotten first: a receive repeated after that
	// receives anew, as it would without a receipt.
	maxReceiptWeight = 1 << 16
	maxReceiptBytes  = 32 << 20
	// maxReceiveIDSize bounds a receive id.
	maxReceiveIDSize = 64
)

// receipt is what one receive id received.
type receipt struct {
	key       string // entity path, NUL, receive id
	path      string
	id        string
	expiresMs int64
	sub       raftbusv1.SubQueue
	deleted   bool // ReceiveAndDelete
	deferred  bool // a ReceiveDeferred's
	sessionID string
	// PeekLock: the messages locked, in the order handed out.
	locked []lockedRef
	// ReceiveAndDelete: the messages removed, as handed out (they share
	// their bodies with nothing else: the messages are gone).
	removed []*raftbusv1.ReceivedMessage
	// removedRefs says where the bodies of removed lie, one for each (nil
	// when every body is in its message).
	removedRefs []BodyRef
	bytes       int64
}

type lockedRef struct {
	seq   int64
	token lockToken
}

func (r *receipt) weight() int { return max(len(r.locked)+len(r.removed), 1) }

// receiptTable holds the receipts of one partition in the order they were
// made. Their expiry times never decrease along that order (see add), so
// expired receipts are always a prefix, and so are the ones forgotten to
// keep within bounds: the live receipts are exactly fifo[head:], whatever
// Ticks ran, which keeps replicas and snapshots in step.
type receiptTable struct {
	byKey  map[string]*receipt
	fifo   []*receipt
	head   int
	weight int
	bytes  int64
	// pins counts the body references of the receipts' removed messages,
	// with the partition's others.
	pins *bodyPins
}

func newReceiptTable(pins *bodyPins) receiptTable {
	return receiptTable{byKey: make(map[string]*receipt), pins: pins}
}

func receiptKey(path string, id []byte) string {
	// Entity paths are checked text without NUL (checkPath).
	return path + "\x00" + string(id)
}

// get returns the receipt of id for path, or nil when there is none (or
// it expired at now).
func (t *receiptTable) get(path string, id []byte, now int64) *receipt {
	r := t.byKey[receiptKey(path, id)]
	if r == nil || r.expiresMs <= now {
		return nil
	}
	return r
}

// add keeps r, expiring no earlier than the newest receipt, and forgets
// the oldest ones while the table is over its bounds (never r itself).
func (t *receiptTable) add(r *receipt) {
	if n := len(t.fifo); n > t.head {
		r.expiresMs = max(r.expiresMs, t.fifo[n-1].expiresMs)
	}
	r.key = receiptKey(r.path, []byte(r.id))
	t.byKey[r.key] = r
	t.fifo = append(t.fifo, r)
	t.weight += r.weight()
	t.bytes += r.bytes
	for _, ref := range r.removedRefs {
		t.pins.add(ref)
	}
	for len(t.fifo)-t.head > 1 && (t.weight > maxReceiptWeight || t.bytes > maxReceiptBytes) {
		t.pop()
	}
}

// prune forgets the receipts expired at now.
func (t *receiptTable) prune(now int64) {
	for t.head < len(t.fifo) && t.fifo[t.head].expiresMs <= now {
		t.pop()
	}
	if t.head > 64 && t.head*2 > len(t.fifo) {
		n := copy(t.fifo, t.fifo[t.head:])
		clear(t.fifo[n:])
		t.fifo = t.fifo[:n]
		t.head = 0
	}
}

func (t *receiptTable) pop() {
	r := t.fifo[t.head]
	t.fifo[t.head] = nil
	t.head++
	if t.byKey[r.key] == r {
		delete(t.byKey, r.key)
	}
	t.weight -= r.weight()
	t.bytes -= r.bytes
	for _, ref := range r.removedRefs {
		t.pins.remove(ref)
	}
}

// last is when the newest receipt expires, if any is kept.
func (t *receiptTable) last() (int64, bool) {
	if n := len(t.fifo); n > t.head {
		return t.fifo[n-1].expiresMs, true
	}
	return 0, false
}

// live returns the receipts kept, oldest first.
func (t *receiptTable) live() []*receipt { return t.fifo[t.head:] }

// receiveRequest is what a receipt must match: a receive id names one
// request, so a repeat that asks for something else is a mistake.
type receiveRequest struct {
	path      string
	id        []byte
	sub       raftbusv1.SubQueue
	deleted   bool
	deferred  bool
	sessionID string
}

func (e *Engine) receiptWindow(q *queue) int64 {
	return max(q.entity.settings.lockDurationMs, minReceiptWindow)
}

// repeat answers a receive whose id has a receipt: ok is false when it has
// none. PeekLock gets the messages locked under the receipt's tokens
// (their delivery counts as they are), ReceiveAndDelete the messages the
// first receive removed.
//
// A PeekLock receipt some of whose locks have ended (expired, most often:
// the answer was lost in a failover that outlasted the lock duration) is
// answered with MESSAGE_LOCK_LOST, not with the messages still locked: the
// first receive took effect, raising the delivery counts of messages its
// receiver never saw, and an answer of fewer messages, or none, would tell
// the receiver that it took only those. Only the answer changes, not the
// state, so replicas of every version agree.
func (e *Engine) repeat(now int64, q *queue, req receiveRequest, sessionToken []byte) (out []*raftbusv1.ReceivedMessage, ok bool, err *Error) {
	if len(req.id) == 0 {
		return nil, false, nil
	}
	r := e.receipts.get(req.path, req.id, now)
	if r == nil {
		return nil, false, nil
	}
	if r.sub != req.sub || r.deleted != req.deleted || r.deferred != req.deferred || r.sessionID != req.sessionID {
		return nil, true, invalidf("receive_id %x was used by another receive of %q", req.id, req.path)
	}
	if r.deleted {
		out = make([]*raftbusv1.ReceivedMessage, len(r.removed))
		for i, m := range r.removed {
			out[i] = keepReceived(m)
			if i < len(r.removedRefs) && r.removedRefs[i].onDisk() {
				e.pending = append(e.pending, PendingBody{Message: out[i].Message, Ref: r.removedRefs[i]})
			}
		}
		return out, true, nil
	}
	if _, err := sessionOf(q, req.sessionID, sessionToken, false); err != nil {
		return nil, true, err
	}
	for _, l := range r.locked {
		if m := q.locks[l.token]; m == nil || m.seq != l.seq {
			return nil, true, errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST,
				"receive %x of %q locked %d messages whose locks ended before it was answered: they were delivered unseen (their delivery counts raised) and are available to receive again",
				req.id, req.path, len(r.locked))
		}
	}
	var blocks blockAllocator
	for i, l := range r.locked {
		out = append(out, e.received(q.locks[l.token], blocks.next(len(r.locked)-i)))
	}
	return out, true, nil
}

// remember keeps the receipt of a receive that handed out messages, or of
// a replay that found none (so that the receive it stands for receives
// nothing if it is applied later).
func (e *Engine) remember(now int64, q *queue, req receiveRequest, got []*raftbusv1.ReceivedMessage) {
	if len(req.id) == 0 {
		return
	}
	r := &receipt{
		path: req.path, id: string(req.id), expiresMs: addMs(now, e.receiptWindow(q)),
		sub: req.sub, deleted: req.deleted, deferred: req.deferred, sessionID: req.sessionID,
	}
	var refs map[*raftbusv1.Message]BodyRef
	if req.deleted && len(e.pending) > 0 {
		refs = make(map[*raftbusv1.Message]BodyRef, len(e.pending))
		for _, p := range e.pending {
			refs[p.Message] = p.Ref
		}
		r.removedRefs = make([]BodyRef, 0, len(got))
	}
	for _, m := range got {
		if req.deleted {
			k := keepReceived(m)
			r.removed = append(r.removed, k)
			r.bytes += int64(proto.Size(k))
			if refs != nil {
				// A body on disk counts as one in memory: the receipt
				// hands it out again.
				ref := refs[m.GetMessage()]
				r.removedRefs = append(r.removedRefs, ref)
				r.bytes += int64(ref.Length)
			}
		} else {
			r.locked = append(r.locked, lockedRef{seq: m.GetSequenceNumber(), token: lockToken(m.GetLockToken())})
		}
	}
	e.receipts.add(r)
}

// keepReceived copies a handed-out message, sharing its body (bodies are
// never modified), so that neither the caller nor the receipt sees changes
// the other makes. m is not written, not even for a moment: a snapshot
// being encoded may read it meanwhile (the body it holds is mostly nil, a
// reference into the log, so the copy made and dropped costs little).
func keepReceived(m *raftbusv1.ReceivedMessage) *raftbusv1.ReceivedMessage {
	c := proto.Clone(m).(*raftbusv1.ReceivedMessage)
	if m.GetMessage() != nil {
		c.Message.Body = m.Message.Body
	}
	return c
}

// HasReceipt reports whether a receive with this id would be answered
// from a receipt (as of the last applied command): the leader proposes
// such a receive at once instead of waiting for messages.
func (e *Engine) HasReceipt(entityPath string, receiveID []byte) bool {
	return len(receiveID) > 0 && e.receipts.get(entityPath, receiveID, e.now) != nil
}

func storedReceipt(r *receipt) *enginev1.Receipt {
	s := &enginev1.Receipt{
		EntityPath: r.path, ReceiveId: []byte(r.id), ExpiresUnixMs: r.expiresMs, SubQueue: r.sub,
		ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK, Deferred: r.deferred, SessionId: r.sessionID,
		Removed: r.removed,
	}
	for _, ref := range r.removedRefs {
		s.RemovedBodyRefs = append(s.RemovedBodyRefs, ref.stored())
	}
	if r.deleted {
		s.ReceiveMode = raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE
	}
	for _, l := range r.locked {
		s.SequenceNumbers = append(s.SequenceNumbers, l.seq)
		s.LockTokens = append(s.LockTokens, l.token[:])
	}
	return s
}

func (e *Engine) restoreReceipt(s *enginev1.Receipt) *Error {
	if err := checkPath(s.GetEntityPath()); err != nil {
		return err
	}
	if n := len(s.GetReceiveId()); n == 0 || n > maxReceiveIDSize {
		return invalidf("receive id of %d bytes", n)
	}
	if len(s.GetSequenceNumbers()) != len(s.GetLockTokens()) {
		return invalidf("%d sequence numbers but %d lock tokens", len(s.GetSequenceNumbers()), len(s.GetLockTokens()))
	}
	if live := e.receipts.live(); len(live) > 0 && live[len(live)-1].expiresMs > s.GetExpiresUnixMs() {
		return invalidf("receipts out of order")
	}
	if s.GetExpiresUnixMs() <= e.now {
		return invalidf("an expired receipt")
	}
	r := &receipt{
		path: s.GetEntityPath(), id: string(s.GetReceiveId()), expiresMs: s.GetExpiresUnixMs(), sub: s.GetSubQueue(),
		deleted: s.GetReceiveMode() == raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, deferred: s.GetDeferred(),
		sessionID: s.GetSessionId(), removed: s.GetRemoved(),
	}
	if !r.deleted && len(r.removed) > 0 {
		return invalidf("a PeekLock receipt with removed messages")
	}
	for i, seq := range s.GetSequenceNumbers() {
		tok := s.GetLockTokens()[i]
		if len(tok) != len(lockToken{}) {
			return invalidf("lock token of %d bytes", len(tok))
		}
		r.locked = append(r.locked, lockedRef{seq: seq, token: lockToken(tok)})
	}
	for _, m := range r.removed {
		r.bytes += int64(proto.Size(m))
	}
	if n := len(s.GetRemovedBodyRefs()); n > 0 {
		if n != len(r.removed) {
			return invalidf("%d body references for %d removed messages", n, len(r.removed))
		}
		for i, ref := range s.GetRemovedBodyRefs() {
			r.removedRefs = append(r.removedRefs, bodyRefOf(ref))
			r.bytes += int64(ref.GetLength())
			if ref.GetLength() > 0 && len(r.removed[i].GetMessage().GetBody()) > 0 {
				return invalidf("a removed message with its body both stored and referenced")
			}
		}
	}
	if e.receipts.byKey[receiptKey(r.path, []byte(r.id))] != nil {
		return invalidf("receive id %x stored twice", r.id)
	}
	e.receipts.add(r)
	return nil
}
