package partition

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Changes returns a channel closed after the next batch of commands is
// applied: what a receive waiting on several partitions at once selects on
// (take it before looking, so that no change in between goes unseen).
func (p *Partition) Changes() <-chan struct{} { return p.fsm.changes() }

// Available reports whether this leader's applied state shows a message
// that a receive from the sub-queue of path would get now.
func (p *Partition) Available(path string, sub raftbusv1.SubQueue) bool {
	if p.raft.State() != raft.Leader {
		return false
	}
	var ok bool
	p.fsm.read(func(e *engine.Engine) { ok = e.HasAvailable(path, sub) })
	return ok
}

// OldestAvailable returns the enqueue time, in Unix milliseconds, of the
// message a receive from the sub-queue of path would get first in this
// replica's applied state, and whether there is one. A follower's state
// trails its leader's: enough to tell which partitions have waited
// longest, not to decide what to lock.
func (p *Partition) OldestAvailable(path string, sub raftbusv1.SubQueue) (enqueuedMs int64, ok bool) {
	p.fsm.read(func(e *engine.Engine) { enqueuedMs, ok = e.OldestAvailable(path, sub) })
	return enqueuedMs, ok
}

// Receive applies a Lock command, waiting up to maxWait for a message to
// become available when there is none. It proposes only when the leader's
// state shows a message available, so idle receivers cost no log entries,
// and it wakes on every applied batch (a send, an abandon, an expired lock
// or an activated schedule can each make one available). Under a session
// only that session's messages count, in processing order. A receive
// whose id has a receipt (a repeat), and a replay, are proposed at once
// and answered with what the command returns, even nothing: a receipt's
// answer is final.
func (p *Partition) Receive(ctx context.Context, lock *enginev1.Lock, maxWait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	defer p.activity.begin()()
	deadline := time.Now().Add(maxWait)
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	for {
		changed := p.fsm.changes()
		if p.raft.State() != raft.Leader {
			return nil, p.notLeader()
		}
		// Whether to propose is decided on local state without a leadership
		// check: the Lock command itself goes through the log, so a stale
		// view costs at most one empty proposal. An unknown entity is
		// proposed too, so that NOT_FOUND comes from committed state.
		now, err := p.Now()
		if err != nil {
			return nil, err
		}
		propose, final := true, lock.GetReplay()
		p.fsm.read(func(e *engine.Engine) {
			if e.HasReceipt(lock.GetEntityPath(), lock.GetReceiveId()) {
				final = true
			} else if _, err := e.RuntimeProperties(lock.EntityPath); err == nil {
				propose = lockable(e, lock, now)
			}
		})
		if propose || final {
			res, err := p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_Lock{Lock: lock}})
			if err != nil {
				return nil, err
			}
			// Another receiver may have taken what was available; then
			// keep waiting.
			if msgs := res.GetLock().GetMessages(); len(msgs) > 0 || final {
				return msgs, nil
			}
		}
		if !time.Now().Before(deadline) {
			return nil, nil
		}
		// Meanwhile the Lock command rides on the next entry that carries
		// a send (see riders.go).
		rider := p.riders.board(lock)
		var woke error
		select {
		case r := <-rider.done:
			if msgs, done, err := p.lockOutcome(r); done {
				return msgs, err
			}
			continue
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			woke = ctx.Err()
		case <-p.stop:
			woke = p.notLeader()
		}
		if !p.riders.alight(rider) {
			// The proposer took it: its entry's outcome comes first.
			select {
			case r := <-rider.done:
				if msgs, done, err := p.lockOutcome(r); done {
					return msgs, err
				}
			case <-p.stop:
				return nil, p.proposalError(raft.ErrRaftShutdown)
			}
		}
		if woke != nil {
			return nil, woke
		}
	}
}

// lockOutcome is what a rider's Lock command came to, and whether the
// receive is done with it: it is unless it found nothing.
func (p *Partition) lockOutcome(r proposalResult) (msgs []*raftbusv1.ReceivedMessage, done bool, err error) {
	res, err := p.outcome(r)
	if err != nil {
		return nil, true, err
	}
	msgs = res.GetLock().GetMessages()
	return msgs, len(msgs) > 0, nil
}
