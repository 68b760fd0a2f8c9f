package partition

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
)

// minTickSpacing keeps a leader from proposing Ticks back to back when the
// engine reports work due that a Tick did not clear (it should not happen;
// if it does, this bounds the cost).
const minTickSpacing = 5 * time.Millisecond

// clockRetry is how soon a leader whose clock is not trusted looks again
// at time-driven work.
const clockRetry = 250 * time.Millisecond

// catchUpRetry is how soon a leader tries again to catch up (see catchUp)
// when its last try failed without leadership moving.
const catchUpRetry = 100 * time.Millisecond

// runLeaderDuties does what only the leader does on its own initiative:
// when elected, it waits until everything committed before its election is
// applied (so reads are current), and while leading it proposes a Tick
// whenever the engine's next deadline (lock expiry, scheduled activation,
// TTL) comes due. It never ticks on a fixed beat.
func (p *Partition) runLeaderDuties() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	leading := p.raft.State() == raft.Leader
	var lastTick time.Time
	halt := p.fsm.halt
	for {
		ready := true
		if leading && p.readyTerm.Load() != p.raft.CurrentTerm() {
			ready = p.catchUp()
		}
		changed := p.fsm.changes()
		wait, tick := time.Hour, false
		if leading {
			var due int64
			var ok bool
			p.fsm.read(func(e *engine.Engine) { due, ok = e.NextDeadline() })
			if ok {
				// Due by the clock the leader stamps with; while that is not
				// trusted a Tick would be refused, so look again later.
				wait, tick = clockRetry, true
				if now, err := p.Now(); err == nil {
					wait = time.Duration(due-now) * time.Millisecond
				}
				if since := time.Since(lastTick); wait < minTickSpacing-since {
					wait = minTickSpacing - since
				}
			}
			if !ready && catchUpRetry < wait {
				wait, tick = catchUpRetry, false
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case leading = <-p.raft.LeaderCh():
			if !leading {
				p.readyTerm.Store(0)
			}
		case <-changed:
		case <-halt:
			// The replica's log failed under a leader's entries (see
			// leaderwrite.go). A barrier is stored durably before it is
			// replicated: the failed log refuses it, and raft steps down
			// rather than lead a replica that applies nothing more.
			halt = nil
			if leading {
				p.raft.Barrier(p.cfg.ApplyTimeout)
			}
		case <-timer.C:
			if leading && tick {
				lastTick = time.Now()
				// Failure means leadership moved; the next leader ticks.
				ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ApplyTimeout)
				_, _ = p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
				cancel()
			}
		case <-p.stop:
			return
		}
		leading = p.raft.State() == raft.Leader
	}
}

// catchUp makes a new leader ready to serve reads: it commits a barrier,
// an entry of its term, and waits for the state machine to apply it; then
// every entry committed before the election is applied too. The wait is
// bounded by ApplyTimeout, so that a stuck Raft does not hold up the
// leader's other duties for long, and the barrier is asked for on the
// waiting goroutine (see awaitStarted). It reports whether the replica is ready.
func (p *Partition) catchUp() bool {
	term := p.raft.CurrentTerm()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ApplyTimeout)
	defer cancel()
	f, err := awaitStarted(ctx, p.stop, func() raft.Future { return p.raft.Barrier(p.cfg.ApplyTimeout) })
	p.noteTransferRefusal(err)
	if err != nil {
		return false
	}
	// Raft keeps barriers from the state machine, so its index says
	// nothing of this one: the state is current through it all the same.
	if f, ok := f.(raft.IndexFuture); ok {
		p.fsm.applyThrough(f.Index())
	}
	p.readyTerm.Store(term)
	if p.cfg.OnLeading != nil {
		p.cfg.OnLeading()
	}
	return true
}
