package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Session limits, as in Service Bus.
const (
	// MaxSessionStateBytes bounds a session's state.
	MaxSessionStateBytes = 256 << 10
	maxSessionIDLength   = 128
)

// session is one SessionId of an entity that requires sessions. It exists
// while it has messages, is held or has state.
type session struct {
	id string
	// all holds the session's messages of the main queue in every state;
	// active those that take part in processing order: available, and
	// locked unless received by sequence number. Both only ever append,
	// since a message joins them when it is enqueued, with the newest order.
	all    messageLog
	active messageLog
	// locked are the session's locked messages, released with the session.
	locked []*message
	state  []byte
	holder lockToken // zero: not held
	// lockedUntil is when the session lock expires, while held.
	lockedUntil int64
	lockIdx     int32 // in sessionIndex.expiring, or -1
	readyIdx    int32 // in sessionIndex.ready, or -1
}

func (s *session) held() bool { return s.holder != (lockToken{}) }

// head is the message processing order hands out next, or nil: the first
// active message, when it is available (a locked one blocks the session).
func (s *session) head() *message {
	if m := s.active.first(); m != nil && m.state == stateAvailable {
		return m
	}
	return nil
}

// sessionLogStart is the room a new session has for messages before its
// logs grow.
const sessionLogStart = 8

// sessionIndex holds the sessions of a main queue of an entity that
// requires sessions.
type sessionIndex struct {
	byID map[string]*session
	// ready are the sessions nobody holds whose head is available, by the
	// order of the head: accept-next takes the top.
	ready sessionHeap
	// expiring are the held sessions by lock expiry.
	expiring sessionHeap
	// owner is the session of every message of the queue.
	owner map[*message]*session
	// lost holds the lock tokens messages had when their session lock was
	// lost, until they are locked again or leave the queue, so that a late
	// settlement hears why its lock is gone. lostBy is the reverse.
	lost   map[lockToken]*message
	lostBy map[*message]lockToken
	// withMessages counts sessions with at least one message.
	withMessages int64
}

func newSessionIndex() *sessionIndex {
	return &sessionIndex{
		byID: make(map[string]*session), owner: make(map[*message]*session),
		lost: make(map[lockToken]*message), lostBy: make(map[*message]lockToken),
		expiring: sessionHeap{byLock: true},
	}
}

// sessionOf is m's session, or nil when q is not indexed by session.
func (q *queue) sessionOf(m *message) *session {
	if q.sessions == nil {
		return nil
	}
	return q.sessions.owner[m]
}

// assign files a message about to be stored under its session.
func (x *sessionIndex) assign(m *message, id string) {
	x.owner[m] = x.get(id, true)
}

// reassign files a message about to be stored again (activated) under the
// session it had.
func (x *sessionIndex) reassign(m *message, s *session) {
	if x != nil && s != nil {
		x.owner[m] = s
	}
}

// get returns the session, created when create is set.
func (x *sessionIndex) get(id string, create bool) *session {
	s := x.byID[id]
	if s == nil && create {
		// One allocation for the session and the first slots of its logs.
		b := &struct {
			s        session
			all, act [sessionLogStart]logSlot
		}{}
		s = &b.s
		s.id, s.lockIdx, s.readyIdx = id, -1, -1
		s.all.slots, s.active.slots = b.all[:0], b.act[:0]
		x.byID[id] = s
	}
	return s
}

// update puts s where it belongs in the heaps after a change, and forgets
// it when nothing is left of it.
func (x *sessionIndex) update(s *session) {
	if !s.held() && s.head() != nil {
		if s.readyIdx < 0 {
			x.ready.push(s)
		} else {
			x.ready.fix(int(s.readyIdx))
		}
	} else {
		x.ready.remove(s)
	}
	if s.all.Len() == 0 && !s.held() && len(s.state) == 0 {
		delete(x.byID, s.id)
	}
}

// inserted records a message stored in the main queue. An activated
// message is removed and stored again, and its session may have been
// forgotten in between: it is put back.
func (x *sessionIndex) inserted(m *message) {
	s := x.owner[m]
	if cur := x.byID[s.id]; cur == nil {
		x.byID[s.id] = s
	} else if cur != s {
		s = cur
		x.owner[m] = s
	}
	if s.all.Len() == 0 {
		x.withMessages++
	}
	s.all.append(m)
}

// removed records a message leaving the main queue.
func (x *sessionIndex) removed(m *message) {
	s := x.owner[m]
	delete(x.owner, m)
	x.forgetLost(m)
	if m.sessionActive {
		s.active.remove(m)
		m.sessionActive = false
	}
	s.all.remove(m)
	if s.all.Len() == 0 {
		x.withMessages--
	}
	x.update(s)
}

// attached records m's new state (see queue.attach).
func (x *sessionIndex) attached(m *message) {
	s := x.owner[m]
	switch {
	case m.state == stateAvailable || (m.state == stateLocked && !m.lockedFromDeferred):
		if !m.sessionActive {
			s.active.append(m)
			m.sessionActive = true
		}
	case m.sessionActive:
		s.active.remove(m)
		m.sessionActive = false
	}
	if m.state == stateLocked {
		s.locked = append(s.locked, m)
		x.forgetLost(m)
	}
	x.update(s)
}

// lose records that m's lock ended with its session's.
func (x *sessionIndex) lose(m *message, token lockToken) {
	x.lost[token] = m
	x.lostBy[m] = token
}

func (x *sessionIndex) forgetLost(m *message) {
	if tok, ok := x.lostBy[m]; ok {
		delete(x.lost, tok)
		delete(x.lostBy, m)
	}
}

// lockLost is the error for a lock token no message holds: SESSION_LOCK_LOST
// when its lock ended with its session's.
func (q *queue) lockLost(token lockToken) *Error {
	if q.sessions != nil && q.sessions.lost[token] != nil {
		return errorf(raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST,
			"the lock of lock token %x ended with the lock of its session; accept the session again", token[:])
	}
	return lockLost(token)
}

// detached records m leaving its state (see queue.detach).
func (x *sessionIndex) detached(m *message) {
	if m.state == stateLocked {
		s := x.owner[m]
		if i := slices.Index(s.locked, m); i >= 0 {
			s.locked = slices.Delete(s.locked, i, i+1)
		}
	}
}

// nextEvent is the earliest session lock expiry.
func (x *sessionIndex) nextEvent() (int64, bool) {
	if s := x.expiring.top(); s != nil {
		return s.lockedUntil, true
	}
	return 0, false
}

// sessions returns the session index of the entity's main queue, or an
// INVALID_ARGUMENT error when the entity does not require sessions.
func (e *Engine) sessions(path string) (*queue, *Error) {
	ent, err := e.entity(path)
	if err != nil {
		return nil, err
	}
	if ent.main.sessions == nil {
		return nil, invalidf("entity %q does not require sessions", path)
	}
	return ent.main, nil
}

// heldSession returns the session held with token, or SESSION_LOCK_LOST.
func heldSession(q *queue, id string, token []byte) (*session, *Error) {
	s := q.sessions.get(id, false)
	if s == nil || !s.held() || s.holder != lockToken(token) {
		return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST,
			"the lock on session %q of %q is unknown or expired; accept the session again", id, q.entity.path)
	}
	return s, nil
}

// sessionOf checks the session a receive or settlement names: required on
// the main queue of an entity that requires sessions, refused elsewhere.
// It returns nil when there is none.
func sessionOf(q *queue, id string, token []byte, required bool) (*session, *Error) {
	if q.sessions == nil {
		if id != "" {
			return nil, invalidf("%q is not received through sessions here; session_id must be empty", q.entity.path)
		}
		return nil, nil
	}
	if id == "" {
		if required {
			return nil, invalidf("entity %q requires sessions: receive through an accepted session", q.entity.path)
		}
		return nil, nil
	}
	return heldSession(q, id, token)
}

func (e *Engine) acceptSession(now int64, tokens *tokenSource, c *enginev1.AcceptSession) (*enginev1.AcceptSessionResult, *Error) {
	q, err := e.sessions(c.GetEntityPath())
	if err != nil {
		return nil, err
	}
	var s *session
	if id := c.GetSessionId(); id != "" {
		s = q.sessions.get(id, true)
		if s.held() {
			return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED,
				"session %q of %q is held by another receiver", id, c.GetEntityPath())
		}
	} else if s = q.sessions.ready.top(); s == nil {
		return &enginev1.AcceptSessionResult{}, nil
	}
	s.holder = tokens.next(q)
	s.lockedUntil = addMs(now, q.entity.settings.lockDurationMs)
	q.sessions.expiring.push(s)
	q.sessions.update(s)
	token := s.holder // a copy: the result must not change with the session
	return &enginev1.AcceptSessionResult{SessionId: s.id, LockToken: token[:], LockedUntil: timestamp(s.lockedUntil)}, nil
}

func (e *Engine) renewSessionLock(now int64, c *enginev1.RenewSessionLock) (int64, *Error) {
	q, err := e.sessions(c.GetEntityPath())
	if err != nil {
		return 0, err
	}
	s, err := heldSession(q, c.GetSessionId(), c.GetLockToken())
	if err != nil {
		return 0, err
	}
	s.lockedUntil = addMs(now, q.entity.settings.lockDurationMs)
	q.sessions.expiring.fix(int(s.lockIdx))
	return s.lockedUntil, nil
}

func (e *Engine) setSessionState(c *enginev1.SetSessionState) *Error {
	q, err := e.sessions(c.GetEntityPath())
	if err != nil {
		return err
	}
	s, err := heldSession(q, c.GetSessionId(), c.GetLockToken())
	if err != nil {
		return err
	}
	if n := len(c.GetState()); n > MaxSessionStateBytes {
		return errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED,
			"session state is %d bytes; at most %d are kept", n, MaxSessionStateBytes)
	}
	s.state = c.GetState()
	if len(s.state) == 0 {
		s.state = nil
	}
	return nil
}

func (e *Engine) releaseSessionCommand(now int64, c *enginev1.ReleaseSession) *Error {
	q, err := e.sessions(c.GetEntityPath())
	if err != nil {
		return err
	}
	s, err := heldSession(q, c.GetSessionId(), c.GetLockToken())
	if err != nil {
		return err
	}
	e.releaseSession(q, s, now)
	return nil
}

// releaseSession ends the session lock at time t (closed, or expired):
// every message locked under it is released as if its lock had ended,
// lowest order first.
func (e *Engine) releaseSession(q *queue, s *session, t int64) {
	locked := slices.Clone(s.locked)
	slices.SortFunc(locked, func(a, b *message) int { return cmp.Compare(a.order, b.order) })
	for _, m := range locked {
		tok := m.token
		e.release(q, m, t)
		if q.sessions.owner[m] != nil { // not expired or dead-lettered
			q.sessions.lose(m, tok)
		}
	}
	q.sessions.expiring.remove(s)
	s.holder, s.lockedUntil = lockToken{}, 0
	q.sessions.update(s)
}

// receiveSession locks the head of a held session (PeekLock: one message,
// since the next one waits for it to be settled) or removes up to n
// messages in order (ReceiveAndDelete).
func (e *Engine) receiveSession(now int64, tokens *tokenSource, q *queue, s *session, n int, deleteMode bool) []*raftbusv1.ReceivedMessage {
	var out []*raftbusv1.ReceivedMessage
	var blocks blockAllocator
	if !deleteMode {
		// One message, its block and the result slice in one allocation.
		one := &struct {
			b   [1]receivedBlock
			out [1]*raftbusv1.ReceivedMessage
		}{}
		n, out, blocks.chunk = 1, one.out[:0], one.b[:]
	}
	lockedUntil := addMs(now, q.entity.settings.lockDurationMs)
	for len(out) < n {
		m := s.head()
		if m == nil {
			break
		}
		if m.deliveryCount >= q.entity.settings.maxDeliveryCount {
			// Possible only after MaxDeliveryCount was lowered.
			e.deadLetter(q, m, now, reasonMaxDeliveryCountExceeded, descriptionMaxDeliveryCount)
			continue
		}
		out = append(out, e.take(q, m, tokens, lockedUntil, deleteMode, blocks.next(n-len(out))))
	}
	return out
}

// GetSessionState returns the state of a session held with lockToken (nil
// when unset), or a SESSION_LOCK_LOST error.
func (e *Engine) GetSessionState(entityPath, sessionID string, lockToken []byte) ([]byte, error) {
	q, err := e.sessions(entityPath)
	if err != nil {
		return nil, err
	}
	s, err := heldSession(q, sessionID, lockToken)
	if err != nil {
		return nil, err
	}
	return s.state, nil
}

// HasAvailableSession reports whether an AcceptSession for the next
// available session would lock one now.
func (e *Engine) HasAvailableSession(entityPath string) bool {
	ent, ok := e.entities[entityPath]
	return ok && ent.main.sessions != nil && ent.main.sessions.ready.top() != nil
}

// HasAvailableInSession reports whether a receive from the session (by its
// holder) would get a message now.
func (e *Engine) HasAvailableInSession(entityPath, sessionID string) bool {
	ent, ok := e.entities[entityPath]
	if !ok || ent.main.sessions == nil {
		return false
	}
	s := ent.main.sessions.get(sessionID, false)
	return s != nil && s.head() != nil
}

// PeekSession is Peek over the main queue restricted to one session's
// messages.
func (e *Engine) PeekSession(entityPath, sessionID string, fromSeq int64, limit int) ([]*raftbusv1.ReceivedMessage, error) {
	ent, err := e.entity(entityPath)
	if err != nil {
		return nil, err
	}
	limit = max(limit, 1)
	from, ok := e.peekStart(fromSeq)
	if !ok {
		return nil, nil
	}
	var out []*raftbusv1.ReceivedMessage
	visit := func(m *message) bool {
		r := e.received(m, &receivedBlock{})
		r.LockToken, r.LockedUntil = nil, nil // a peek shows no lock
		if ent.main.sessions != nil || r.GetMessage().GetSessionId() == sessionID {
			out = append(out, r)
		}
		return len(out) < limit
	}
	if x := ent.main.sessions; x != nil {
		if s := x.get(sessionID, false); s != nil {
			s.all.ascend(from, visit)
		}
		return out, nil
	}
	ent.main.all.ascend(from, visit)
	return out, nil
}

// sessionHeap is an indexed min-heap of sessions: by lock expiry (ties by
// id) or by the order of their head message.
type sessionHeap struct {
	items  []*session
	byLock bool
}

func (h *sessionHeap) index(s *session) *int32 {
	if h.byLock {
		return &s.lockIdx
	}
	return &s.readyIdx
}

func (h *sessionHeap) top() *session {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *sessionHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if h.byLock {
		return a.lockedUntil < b.lockedUntil || (a.lockedUntil == b.lockedUntil && strings.Compare(a.id, b.id) < 0)
	}
	return a.active.first().order < b.active.first().order
}

func (h *sessionHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.index(h.items[i]) = int32(i)
	*h.index(h.items[j]) = int32(j)
}

func (h *sessionHeap) push(s *session) {
	*h.index(s) = int32(len(h.items))
	h.items = append(h.items, s)
	h.up(len(h.items) - 1)
}

func (h *sessionHeap) remove(s *session) {
	i := int(*h.index(s))
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	*h.index(s) = -1
	if i != last {
		h.fix(i)
	}
}

func (h *sessionHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *sessionHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *sessionHeap) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// storedSessions are the sessions a snapshot records, in id order: those
// held or with state (the others are rebuilt from their messages).
func storedSessions(x *sessionIndex) []*enginev1.StoredSession {
	if x == nil {
		return nil
	}
	var out []*enginev1.StoredSession
	for _, s := range x.byID {
		if !s.held() && len(s.state) == 0 {
			continue
		}
		r := &enginev1.StoredSession{SessionId: s.id, State: s.state}
		if s.held() {
			r.LockToken, r.LockedUntilUnixMs = slices.Clone(s.holder[:]), s.lockedUntil
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *enginev1.StoredSession) int { return strings.Compare(a.GetSessionId(), b.GetSessionId()) })
	return out
}

// restoreSession applies a session record, after the entity's messages.
func (e *Engine) restoreSession(ent *entity, r *enginev1.StoredSession) error {
	x := ent.main.sessions
	if x == nil {
		return errors.New("the entity does not require sessions")
	}
	if err := checkSessionID(r.GetSessionId()); err != nil {
		return err
	}
	if len(r.GetState()) > MaxSessionStateBytes {
		return fmt.Errorf("state of %d bytes", len(r.GetState()))
	}
	s := x.get(r.GetSessionId(), true)
	if s.held() || len(s.state) > 0 {
		return errors.New("stored twice")
	}
	if len(r.GetState()) > 0 {
		s.state = r.GetState()
	}
	if tok := r.GetLockToken(); len(tok) > 0 {
		if len(tok) != len(lockToken{}) || lockToken(tok) == (lockToken{}) {
			return errors.New("the lock token is not 16 bytes or zero")
		}
		if r.GetLockedUntilUnixMs() <= e.now {
			return errors.New("the session lock expired before the snapshot was taken")
		}
		s.holder, s.lockedUntil = lockToken(tok), r.GetLockedUntilUnixMs()
		x.expiring.push(s)
	}
	x.update(s)
	return nil
}

// The encoded fields of a message with a session id and nothing else but
// its id and body (the common case on session entities) are made and read
// without the protobuf runtime. The bytes are those proto.Marshal gives.
const sessionIDField = 9 // raftbus.v1.Message.session_id

func sessionOnly(m *raftbusv1.Message) bool {
	return m.GetSessionId() != "" && m.GetContentType() == "" && m.GetCorrelationId() == "" && m.GetSubject() == "" &&
		m.GetTo() == "" && m.GetReplyTo() == "" && m.GetReplyToSessionId() == "" && m.GetPartitionKey() == "" &&
		m.GetTimeToLive() == nil && m.GetScheduledEnqueueTime() == nil && len(m.GetApplicationProperties()) == 0
}

func sessionOnlyMeta(id string) []byte {
	b := make([]byte, 0, 2+protowire.SizeBytes(len(id)))
	b = protowire.AppendTag(b, sessionIDField, protowire.BytesType)
	return protowire.AppendString(b, id)
}

// sessionOnlyID returns the session id of meta made by sessionOnlyMeta;
// ok is false for any other meta.
func sessionOnlyID(meta []byte) (id string, ok bool) {
	if len(meta) == 0 || meta[0] != sessionIDField<<3|byte(protowire.BytesType) {
		return "", false
	}
	v, n := protowire.ConsumeBytes(meta[1:])
	if n < 0 || 1+n != len(meta) {
		return "", false
	}
	return string(v), true
}
