package partition

import (
	"context"
	"time"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Receive applies a Lock command, waiting up to maxWait for a message to
// become available when there is none. It proposes only when the leader's
// state shows a message available, so idle receivers cost no log entries,
// and it wakes on every applied batch (a send, an abandon, an expired lock
// or an activated schedule can each make one available).
func (p *Partition) Receive(ctx context.Context, lock *enginev1.Lock, maxWait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	deadline := time.Now().Add(maxWait)
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	for {
		changed := p.fsm.changes()
		available := false
		var missing error
		if err := p.Read(ctx, func(e *engine.Engine) {
			if _, err := e.RuntimeProperties(lock.EntityPath); err != nil {
				missing = err
				return
			}
			available = e.HasAvailable(lock.EntityPath, lock.SubQueue)
		}); err != nil {
			return nil, err
		}
		if missing != nil {
			return nil, FromEngine(missing)
		}
		if available {
			res, err := p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_Lock{Lock: lock}})
			if err != nil {
				return nil, err
			}
			// Another receiver may have taken what was available; then
			// keep waiting.
			if msgs := res.GetLock().GetMessages(); len(msgs) > 0 {
				return msgs, nil
			}
		}
		if !time.Now().Before(deadline) {
			return nil, nil
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
