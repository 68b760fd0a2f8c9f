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
	for {
		if leading && p.readyTerm.Load() != p.raft.CurrentTerm() {
			term := p.raft.CurrentTerm()
			// A barrier is an entry of this term: once applied, so is every
			// entry of earlier terms.
			if err := p.await(context.Background(), p.raft.Barrier(p.cfg.ApplyTimeout)); err == nil {
				p.readyTerm.Store(term)
			}
		}
		changed := p.fsm.changes()
		wait := time.Hour
		if leading {
			var due int64
			var ok bool
			p.fsm.read(func(e *engine.Engine) { due, ok = e.NextDeadline() })
			if ok {
				// Due by the clock the leader stamps with; while that is not
				// trusted a Tick would be refused, so look again later.
				wait = clockRetry
				if now, err := p.Now(); err == nil {
					wait = time.Duration(due-now) * time.Millisecond
				}
				if since := time.Since(lastTick); wait < minTickSpacing-since {
					wait = minTickSpacing - since
				}
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case leading = <-p.raft.LeaderCh():
			if !leading {
				p.readyTerm.Store(0)
			}
		case <-changed:
		case <-timer.C:
			if leading {
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
