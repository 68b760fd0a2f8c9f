package engine

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// receiveQueue finds the queue a receive or settlement addresses.
func (e *Engine) receiveQueue(path string, sq raftbusv1.SubQueue) (*queue, *Error) {
	ent, err := e.entity(path)
	if err != nil {
		return nil, err
	}
	if ent.topic != nil {
		return nil, invalidf("%q is a topic, which has no receivers: receive from one of its subscriptions (<topic>%s<name>)", path, subscriptionsSegment)
	}
	q, err := ent.queue(sq)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// receive locks (PeekLock) or removes (ReceiveAndDelete) up to max_messages
// available messages, lowest order first; a repeat of a receive id with a
// receipt gets what the receipt holds instead (see receipt.go).
func (e *Engine) receive(now int64, tokens *tokenSource, c *enginev1.Lock) ([]*raftbusv1.ReceivedMessage, *Error) {
	q, err := e.receiveQueue(c.GetEntityPath(), c.GetSubQueue())
	if err != nil {
		return nil, err
	}
	deleteMode := c.GetReceiveMode() == raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE
	req := receiveRequest{path: c.GetEntityPath(), id: c.GetReceiveId(), sub: c.GetSubQueue(), deleted: deleteMode, sessionID: c.GetSessionId()}
	if out, repeated, err := e.repeat(now, q, req, c.GetSessionLockToken()); repeated {
		return out, err
	}
	s, err := sessionOf(q, c.GetSessionId(), c.GetSessionLockToken(), true)
	if err != nil {
		return nil, err
	}
	if c.GetReplay() {
		e.remember(now, q, req, nil)
		return nil, nil
	}
	var out []*raftbusv1.ReceivedMessage
	budget := newByteBudget(c.GetMaxBytes())
	if s != nil {
		out = e.receiveSession(now, tokens, q, s, int(max(c.GetMaxMessages(), 1)), &budget, deleteMode)
	} else {
		out = e.receiveAvailable(now, tokens, q, int64(max(c.GetMaxMessages(), 1)), &budget, deleteMode)
	}
	if len(out) > 0 {
		e.remember(now, q, req, out)
	}
	return out, nil
}

// receiveAvailable locks or removes up to n available messages of q, as
// many as budget takes.
func (e *Engine) receiveAvailable(now int64, tokens *tokenSource, q *queue, n int64, budget *byteBudget, deleteMode bool) []*raftbusv1.ReceivedMessage {
	out := make([]*raftbusv1.ReceivedMessage, 0, min(n, q.availableCount))
	var blocks blockAllocator
	lockedUntil := addMs(now, q.entity.settings.lockDurationMs)
	for int64(len(out)) < n {
		m := q.nextAvailable()
		if m == nil {
			break
		}
		if !q.deadLetter && m.deliveryCount >= q.entity.settings.maxDeliveryCount {
			// Possible only after MaxDeliveryCount was lowered.
			e.deadLetter(q, m, now, reasonMaxDeliveryCountExceeded, descriptionMaxDeliveryCount)
			continue
		}
		if !budget.take(m) {
			break
		}
		out = append(out, e.take(q, m, tokens, lockedUntil, false, deleteMode, blocks.next(cap(out)-len(out))))
	}
	return out
}

// take hands m to a receiver: locked (until lockedUntil, or under its
// session's lock), or removed in ReceiveAndDelete mode.
func (e *Engine) take(q *queue, m *message, tokens *tokenSource, lockedUntil int64, underSession, deleteMode bool, b *receivedBlock) *raftbusv1.ReceivedMessage {
	q.entity.counters.Received++
	if deleteMode {
		m.deliveryCount++
		r := e.received(m, b)
		q.remove(m)
		return r
	}
	q.lock(m, tokens.next(q), lockedUntil, underSession)
	return e.received(m, b)
}

// lockTerms is how long a receive locks its messages: for the entity's
// lock duration, or, under a session, for as long as the session lock is
// held (commands of versions before versionSessionLocksCoverMessages gave
// them their own lock there too).
func (e *Engine) lockTerms(now int64, q *queue, s *session) (lockedUntil int64, underSession bool) {
	if s != nil && e.version >= versionSessionLocksCoverMessages {
		return s.lockedUntil, true
	}
	return addMs(now, q.entity.settings.lockDurationMs), false
}

// receiveDeferred receives deferred messages by sequence number, in the
// order asked (repeats ignored): none when one of them is not a deferred
// message, else as many as the command's byte budget takes (the others
// stay deferred).
func (e *Engine) receiveDeferred(now int64, tokens *tokenSource, c *enginev1.ReceiveDeferred) ([]*raftbusv1.ReceivedMessage, *Error) {
	q, err := e.receiveQueue(c.GetEntityPath(), c.GetSubQueue())
	if err != nil {
		return nil, err
	}
	deleteMode := c.GetReceiveMode() == raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE
	req := receiveRequest{path: c.GetEntityPath(), id: c.GetReceiveId(), sub: c.GetSubQueue(), deleted: deleteMode, deferred: true, sessionID: c.GetSessionId()}
	if out, repeated, err := e.repeat(now, q, req, c.GetSessionLockToken()); repeated {
		return out, err
	}
	s, err := sessionOf(q, c.GetSessionId(), c.GetSessionLockToken(), true)
	if err != nil {
		return nil, err
	}
	seqs := c.GetSequenceNumbers()
	picked := make([]*message, 0, len(seqs))
	for _, seq := range seqs {
		m := e.lookup(q, seq)
		if m == nil || (m.state != stateDeferred && !containsMessage(picked, m)) || q.sessionOf(m) != s {
			return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND,
				"no deferred message with sequence number %d in %q", seq, c.GetEntityPath())
		}
		if !containsMessage(picked, m) {
			picked = append(picked, m)
		}
	}
	budget := newByteBudget(c.GetMaxBytes())
	for i, m := range picked {
		if !budget.take(m) {
			picked = picked[:i]
			break
		}
	}
	lockedUntil, underSession := e.lockTerms(now, q, s)
	out := make([]*raftbusv1.ReceivedMessage, len(picked))
	var blocks blockAllocator
	for i, m := range picked {
		out[i] = e.take(q, m, tokens, lockedUntil, underSession, deleteMode, blocks.next(len(picked)-i))
	}
	if len(out) > 0 {
		e.remember(now, q, req, out)
	}
	return out, nil
}

func containsMessage(ms []*message, m *message) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// settle completes, abandons, dead-letters or defers a locked message.
func (e *Engine) settle(now int64, c *enginev1.Settle) *Error {
	q, err := e.receiveQueue(c.GetEntityPath(), c.GetSubQueue())
	if err != nil {
		return err
	}
	s, err := sessionOf(q, c.GetSessionId(), c.GetSessionLockToken(), false)
	if err != nil {
		return err
	}
	tok := lockToken(c.GetLockToken())
	m := q.locks[tok]
	if m == nil && e.repeatsSettlement(now, q, c, tok) {
		return nil
	}
	if m == nil || (s != nil && q.sessionOf(m) != s) {
		return q.lockLost(tok)
	}
	disposition := c.GetDisposition()
	if disposition == enginev1.Disposition_DISPOSITION_DEAD_LETTER && q.deadLetter {
		return invalidf(deadLetterFromDeadLetterQueueText)
	}
	meta, err := modifiedMeta(m, c.GetPropertiesToModify())
	if err != nil {
		return err
	}
	if meta != nil {
		q.setMeta(m, meta)
	}
	switch disposition {
	case enginev1.Disposition_DISPOSITION_COMPLETE:
		q.entity.counters.Completed++
		q.remove(m)
	case enginev1.Disposition_DISPOSITION_ABANDON:
		q.entity.counters.Abandoned++
		e.release(q, m, now)
	case enginev1.Disposition_DISPOSITION_DEAD_LETTER:
		e.deadLetter(q, m, now, c.GetDeadLetterReason(), c.GetDeadLetterErrorDescription())
	case enginev1.Disposition_DISPOSITION_DEFER:
		q.entity.counters.Deferred++
		switch {
		case !q.deadLetter && m.expiresMs <= now:
			e.expire(q, m, now) // it expired while locked
		case !q.deadLetter && e.version >= versionDeferUsesDelivery && m.deliveryCount >= q.entity.settings.maxDeliveryCount:
			// A deferral ends a delivery like an abandon: the last one
			// allowed sends the message to the dead-letter sub-queue, as in
			// Service Bus, so that receiving it by sequence number never
			// delivers it beyond MaxDeliveryCount.
			e.deadLetter(q, m, now, reasonMaxDeliveryCountExceeded, descriptionMaxDeliveryCount)
		default:
			q.move(m, stateDeferred)
		}
	}
	e.rememberSettled(now, q, c, tok)
	return nil
}

// modifiedMeta returns m's encoded fields with props applied, or nil when
// props is empty.
func modifiedMeta(m *message, props map[string]*raftbusv1.PropertyValue) ([]byte, *Error) {
	if len(props) == 0 {
		return nil, nil
	}
	msg := &raftbusv1.Message{}
	if err := proto.Unmarshal(m.meta, msg); err != nil {
		return nil, invalidf("message %d cannot be modified: %v", m.seq, err)
	}
	if msg.ApplicationProperties == nil {
		msg.ApplicationProperties = make(map[string]*raftbusv1.PropertyValue, len(props))
	}
	for k, v := range props {
		msg.ApplicationProperties[k] = v
	}
	b, err := deterministic.Marshal(msg)
	if err != nil {
		return nil, invalidf("properties_to_modify: %v", err)
	}
	return b, nil
}

func (e *Engine) renewLock(now int64, c *enginev1.RenewLock) (int64, *Error) {
	q, err := e.receiveQueue(c.GetEntityPath(), c.GetSubQueue())
	if err != nil {
		return 0, err
	}
	s, err := sessionOf(q, c.GetSessionId(), c.GetSessionLockToken(), false)
	if err != nil {
		return 0, err
	}
	tok := lockToken(c.GetLockToken())
	m := q.locks[tok]
	if m == nil || (s != nil && q.sessionOf(m) != s) {
		return 0, q.lockLost(tok)
	}
	if m.underSessionLock {
		// Its lock is its session's: renewing one renews the other.
		return e.renewSession(now, q, q.sessionOf(m)), nil
	}
	until := addMs(now, q.entity.settings.lockDurationMs)
	q.renew(m, until)
	return until, nil
}

// release ends m's lock without settlement at time t (abandon, or the lock
// expired): the message expires, goes to the dead-letter sub-queue when it
// used up its deliveries, or becomes available (deferred) again.
func (e *Engine) release(q *queue, m *message, t int64) {
	switch {
	case !q.deadLetter && m.expiresMs <= t:
		e.expire(q, m, t)
	case !q.deadLetter && m.deliveryCount >= q.entity.settings.maxDeliveryCount:
		e.deadLetter(q, m, t, reasonMaxDeliveryCountExceeded, descriptionMaxDeliveryCount)
	case m.lockedFromDeferred:
		q.move(m, stateDeferred)
	default:
		q.move(m, stateAvailable)
	}
}

// expire removes a message whose time to live ended, to the dead-letter
// sub-queue when the entity says so.
func (e *Engine) expire(q *queue, m *message, t int64) {
	q.entity.counters.Expired++
	if q.entity.settings.deadLetterOnExpiry {
		e.deadLetter(q, m, t, reasonTTLExpired, descriptionTTLExpired)
		return
	}
	q.remove(m)
}

// deadLetter moves m from the main queue q to its dead-letter sub-queue.
// It keeps its sequence number, enqueue time, delivery count and
// properties, as in Service Bus, and takes its place among the
// dead-lettered messages by that number. (Entries written before
// versionDeadLetterKeepsSequence gave it a new number and kept the old one
// as its enqueued sequence number.)
func (e *Engine) deadLetter(q *queue, m *message, t int64, reason, description string) {
	q.entity.counters.DeadLettered++
	q.remove(m)
	m.deadLetter = &deadLetterInfo{reason: reason, description: description, source: q.entity.path, enqueuedSeq: m.seq, origin: m.order}
	m.state = stateAvailable
	if e.version < versionDeadLetterKeepsSequence {
		m.seq, m.order = e.sequence()
	}
	e.store(q.entity.deadLetter, m)
}

// fire applies the queue's earliest event, due at t. Lock expiries and
// activations go before session lock expiries, and those before expiries
// due at the same time.
func (e *Engine) fire(q *queue, t int64) {
	if m := q.timers.top(); m != nil && m.dueMs == t {
		if m.state == stateLocked {
			e.release(q, m, t)
		} else {
			e.activate(q, m, t)
		}
		return
	}
	if q.sessions != nil {
		if s := q.sessions.expiring.top(); s != nil && s.lockedUntil == t {
			e.releaseSession(q, s, t)
			return
		}
	}
	m := q.expiries.top()
	q.expiries.remove(m)
	if m.state != stateLocked {
		// A locked message expires when its lock ends (see release).
		e.expire(q, m, t)
	}
}

// receivedBlock holds everything one handed-out message needs, so that a
// batch of them is a single allocation.
type receivedBlock struct {
	r                              raftbusv1.ReceivedMessage
	msg                            raftbusv1.Message
	enqueued, lockedUntil, expires timestamppb.Timestamp
	token                          lockToken
}

// blockAllocator hands out receivedBlocks from chunks small enough to stay
// clear of the allocator's large-object path.
type blockAllocator struct {
	chunk []receivedBlock
}

const blocksPerChunk = 32

// next returns a zero block; remaining is how many more the caller expects
// to need (this one included).
func (a *blockAllocator) next(remaining int) *receivedBlock {
	if len(a.chunk) == 0 {
		a.chunk = make([]receivedBlock, min(max(remaining, 1), blocksPerChunk))
	}
	b := &a.chunk[0]
	a.chunk = a.chunk[1:]
	return b
}

// received is m as the broker hands it out (with its lock when locked),
// built in b.
func (e *Engine) received(m *message, b *receivedBlock) *raftbusv1.ReceivedMessage {
	if id, ok := sessionOnlyID(m.meta); ok {
		b.msg.SessionId = id
	} else if m.meta != nil {
		// meta was encoded by this package (or checked on restore).
		_ = proto.Unmarshal(m.meta, &b.msg)
	}
	b.msg.MessageId = m.id
	e.handOut(&b.msg, m)
	r := &b.r
	r.Message = &b.msg
	r.SequenceNumber = m.seq
	r.EnqueuedSequenceNumber = m.seq
	r.DeliveryCount = m.deliveryCount
	r.PartitionId = e.partitionID
	r.State = raftbusv1.MessageState_MESSAGE_STATE_ACTIVE
	if m.state != stateScheduled {
		setTimestamp(&b.enqueued, m.enqueuedMs)
		r.EnqueuedTime = &b.enqueued
		if m.expiresMs != noExpiry {
			setTimestamp(&b.expires, m.expiresMs)
			r.ExpiresAt = &b.expires
		}
	}
	switch {
	case m.state == stateScheduled:
		r.State = raftbusv1.MessageState_MESSAGE_STATE_SCHEDULED
	case m.state == stateDeferred || m.lockedFromDeferred:
		r.State = raftbusv1.MessageState_MESSAGE_STATE_DEFERRED
	}
	if m.state == stateLocked {
		b.token = m.token
		r.LockToken = b.token[:]
		setTimestamp(&b.lockedUntil, m.dueMs)
		r.LockedUntil = &b.lockedUntil
	}
	if dl := m.deadLetter; dl != nil {
		r.EnqueuedSequenceNumber = dl.enqueuedSeq
		r.DeadLetterReason = dl.reason
		r.DeadLetterErrorDescription = dl.description
		r.DeadLetterSource = dl.source
	} else if props := b.msg.ApplicationProperties; props != nil && e.version >= versionForwardedDeadLetterReason {
		// In Service Bus a message's dead-letter reason and description
		// are its application properties of those names, which a dead
		// letter forwarded to another entity keeps (see forwarded): the
		// target hands them out as what they are.
		r.DeadLetterReason = props[DeadLetterReasonProperty].GetStringValue()
		r.DeadLetterErrorDescription = props[DeadLetterErrorDescriptionProperty].GetStringValue()
	}
	return r
}

// Peek returns up to max messages (at least one) of the sub-queue from
// sequence number fromSeq on, in sequence order, whatever their state
// (available, locked, deferred, scheduled), without locking them or
// counting a delivery; no more than maxBytes of them (see byteBudget;
// zero or less: no limit).
func (e *Engine) Peek(entityPath string, subQueue raftbusv1.SubQueue, fromSeq int64, max int, maxBytes int64) ([]*raftbusv1.ReceivedMessage, error) {
	ent, err := e.entity(entityPath)
	if err != nil {
		return nil, err
	}
	q, err := ent.queue(subQueue)
	if err != nil {
		return nil, err
	}
	if max < 1 {
		max = 1
	}
	var out []*raftbusv1.ReceivedMessage
	budget := newByteBudget(maxBytes)
	if from, ok := e.peekStart(fromSeq); ok {
		q.all.ascend(from, func(m *message) bool {
			if m.state == stateTransfer {
				return true // not the entity's any more
			}
			if !budget.take(m) {
				return false
			}
			r := e.received(m, &receivedBlock{})
			r.LockToken, r.LockedUntil = nil, nil // a peek shows no lock
			out = append(out, r)
			return len(out) < max
		})
	}
	return out, nil
}
