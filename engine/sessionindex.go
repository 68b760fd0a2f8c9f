package engine

import (
	"slices"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
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
// available one (its holder may have earlier ones locked).
func (s *session) head() *message { return s.nextAvailable(0) }

// nextAvailable is the first available message in processing order from
// order from on, or nil. Only locked messages are skipped, and only while
// the session is held, so a receive looks at each message once.
func (s *session) nextAvailable(from uint64) *message {
	var next *message
	s.active.ascend(from, func(m *message) bool {
		if m.state == stateAvailable {
			next = m
			return false
		}
		return true
	})
	return next
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
	ready indexedHeap[*session, sessionReadyKey]
	// expiring are the held sessions by lock expiry.
	expiring indexedHeap[*session, sessionLockKey]
	// owner is the session of every message of the queue.
	owner map[*message]*session
	// lost holds the lock tokens messages had when their session lock was
	// lost, until they are locked again or leave the queue, so that a late
	// settlement hears why its lock is gone. lostBy is the reverse.
	lost   map[lockToken]*message
	lostBy map[*message]lockToken
	// withMessages counts sessions with at least one message.
	withMessages int64
	// stateBytes is the size of every session's state.
	stateBytes int64
}

func newSessionIndex() *sessionIndex {
	return &sessionIndex{
		byID: make(map[string]*session), owner: make(map[*message]*session),
		lost: make(map[lockToken]*message), lostBy: make(map[*message]lockToken),
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

// setState replaces s's state (empty: none), keeping stateBytes.
func (x *sessionIndex) setState(s *session, state []byte) {
	if len(state) == 0 {
		state = nil
	}
	x.stateBytes += int64(len(state) - len(s.state))
	s.state = state
}

// stateBytes is the size of the session states of q (none when q is not
// indexed by session).
func (q *queue) stateBytes() int64 {
	if q.sessions == nil {
		return 0
	}
	return q.sessions.stateBytes
}

// update puts s where it belongs in the heaps after a change, and forgets
// it when nothing is left of it.
func (x *sessionIndex) update(s *session) {
	if !s.held() && s.head() != nil {
		if s.readyIdx < 0 {
			x.ready.push(s)
		} else {
			x.ready.changed(s)
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
