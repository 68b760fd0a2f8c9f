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
	if s == nil || !s.held() || len(token) != len(lockToken{}) || s.holder != lockToken(token) {
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
	return e.renewSession(now, q, s), nil
}

// renewSession extends the lock of the held session s by the entity's lock
// duration, and with it the locks of the messages locked under it.
func (e *Engine) renewSession(now int64, q *queue, s *session) int64 {
	s.lockedUntil = addMs(now, q.entity.settings.lockDurationMs)
	q.sessions.expiring.changed(s)
	for _, m := range s.locked {
		if m.underSessionLock {
			m.dueMs = s.lockedUntil
		}
	}
	return s.lockedUntil
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
	if grow := int64(len(c.GetState()) - len(s.state)); grow > 0 && e.version >= versionQuotaCountsSessionState {
		// A subscription's sessions count towards its topic's size.
		owner := q.entity
		if sub := owner.subscription; sub != nil {
			owner = sub.topic
		}
		if used, limit := owner.bytes(), owner.settings.maxSizeBytes; used+grow > limit {
			return errorf(raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED,
				"entity %q holds %d bytes; a session state %d bytes larger would exceed its limit of %d", owner.path, used, grow, limit)
		}
	}
	q.sessions.setState(s, c.GetState())
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

// receiveSession locks (PeekLock) or removes (ReceiveAndDelete) up to n
// available messages of a held session in processing order; those it
// locks are locked under the session's lock. (Commands of versions before
// versionSessionLocksCoverMessages locked one message at a time in a
// session, and only when no earlier one was locked.)
func (e *Engine) receiveSession(now int64, tokens *tokenSource, q *queue, s *session, n int, budget *byteBudget, deleteMode bool) []*raftbusv1.ReceivedMessage {
	var out []*raftbusv1.ReceivedMessage
	var blocks blockAllocator
	if n == 1 {
		// One message, its block and the result slice in one allocation:
		// the most frequent session receive.
		one := &struct {
			b   [1]receivedBlock
			out [1]*raftbusv1.ReceivedMessage
		}{}
		out, blocks.chunk = one.out[:0], one.b[:]
	}
	lockedUntil, underSession := e.lockTerms(now, q, s)
	legacy := e.version < versionSessionLocksCoverMessages
	if legacy && !deleteMode {
		n = 1
	}
	var from uint64
	for len(out) < n {
		var m *message
		if legacy {
			// The head of the session, unless it is locked.
			if m = s.active.first(); m != nil && m.state != stateAvailable {
				m = nil
			}
		} else {
			m = s.nextAvailable(from)
		}
		if m == nil {
			break
		}
		from = m.order + 1
		if m.deliveryCount >= q.entity.settings.maxDeliveryCount {
			// Possible only after MaxDeliveryCount was lowered.
			e.deadLetter(q, m, now, reasonMaxDeliveryCountExceeded, descriptionMaxDeliveryCount)
			continue
		}
		if !budget.take(m) {
			break
		}
		out = append(out, e.take(q, m, tokens, lockedUntil, underSession, deleteMode, blocks.next(n-len(out))))
	}
	return out
}

// GetSessionState returns a copy of the state of a session held with
// lockToken (nil when unset), or a SESSION_LOCK_LOST error. It is a read,
// not a command: the partition leader serves it from its state, checking
// the lock against its clock (nowMs) since an expiry may be due but not
// yet applied.
func (e *Engine) GetSessionState(entityPath, sessionID string, lockToken []byte, nowMs int64) ([]byte, error) {
	q, err := e.sessions(entityPath)
	if err != nil {
		return nil, err
	}
	s, err := heldSession(q, sessionID, lockToken)
	if err != nil {
		return nil, err
	}
	if s.lockedUntil <= nowMs {
		// Expired, though no command has applied the expiry yet.
		return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST,
			"the lock on session %q of %q expired; accept the session again", sessionID, entityPath)
	}
	return slices.Clone(s.state), nil
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
func (e *Engine) PeekSession(entityPath, sessionID string, fromSeq int64, limit int, maxBytes int64) ([]*raftbusv1.ReceivedMessage, error) {
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
	budget := newByteBudget(maxBytes)
	visit := func(m *message) bool {
		r := e.received(m, &receivedBlock{})
		r.LockToken, r.LockedUntil = nil, nil // a peek shows no lock
		if ent.main.sessions != nil || r.GetMessage().GetSessionId() == sessionID {
			if !budget.take(m) {
				return false
			}
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
	x.setState(s, r.GetState())
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
