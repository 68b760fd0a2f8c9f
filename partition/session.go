package partition

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// AcceptSession applies an AcceptSession command. A named session is
// accepted (or refused) at once; for the next available session it waits
// up to maxWait for one, proposing only when the leader's state shows one
// available, like Receive. The result has an empty session id when none
// became available in time.
func (p *Partition) AcceptSession(ctx context.Context, accept *enginev1.AcceptSession, maxWait time.Duration) (*enginev1.AcceptSessionResult, error) {
	defer p.activity.begin()()
	cmd := func() (*enginev1.AcceptSessionResult, error) {
		res, err := p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_AcceptSession{AcceptSession: accept}})
		if err != nil {
			return nil, err
		}
		return res.GetAcceptSession(), nil
	}
	if accept.GetSessionId() != "" {
		return cmd()
	}
	deadline := time.Now().Add(maxWait)
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	for {
		changed := p.fsm.changes()
		if p.raft.State() != raft.Leader {
			return nil, p.notLeader()
		}
		propose := true
		p.fsm.read(func(e *engine.Engine) { propose = sessionAcceptable(e, accept.GetEntityPath()) })
		if propose {
			r, err := cmd()
			if err != nil || r.GetSessionId() != "" {
				return r, err
			}
			// Another receiver took it; keep waiting.
		}
		if !time.Now().Before(deadline) {
			return &enginev1.AcceptSessionResult{}, nil
		}
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.stop:
			return nil, p.notLeader()
		}
	}
}

// sessionAcceptable tells whether an accept-next is worth proposing: a
// session is available, or the command would fail (an unknown entity, or
// one without sessions), which should come from committed state.
func sessionAcceptable(e *engine.Engine, path string) bool {
	if e.HasAvailableSession(path) {
		return true
	}
	// With no session named, the state read fails with INVALID_ARGUMENT or
	// NOT_FOUND only when the entity itself does not take sessions.
	_, err := e.GetSessionState(path, "", nil, 0)
	var ee *engine.Error
	return !errors.As(err, &ee) || ee.Reason != raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST
}

// lockable tells whether a Lock is worth proposing: a message is
// available to it, or, under a session, the session lock is lost at now
// (so that SESSION_LOCK_LOST comes from committed state).
func lockable(e *engine.Engine, lock *enginev1.Lock, now int64) bool {
	id := lock.GetSessionId()
	if id == "" {
		return e.HasAvailable(lock.GetEntityPath(), lock.GetSubQueue())
	}
	if _, err := e.GetSessionState(lock.GetEntityPath(), id, lock.GetSessionLockToken(), now); err != nil {
		return true
	}
	return e.HasAvailableInSession(lock.GetEntityPath(), id)
}
