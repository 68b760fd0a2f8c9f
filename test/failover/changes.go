package failover

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/history"
)

// Changes ChangeEntities makes.
const (
	// ChangeSubscriptions creates subscriptions of Topic (with a SQL
	// filter the checker knows) and deletes them again.
	ChangeSubscriptions = "subscriptions"
	// ChangeRules adds rules to and removes them from Flip.
	ChangeRules = "rules"
	// ChangeSettings switches WorkQueue's lock duration and
	// MaxDeliveryCount back and forth.
	ChangeSettings = "settings"
	// ChangeQueues creates queues, sends a few messages to each and
	// deletes them again, under traffic.
	ChangeQueues = "queues"
)

// tmpFilter is the filter of the subscriptions ChangeEntities makes.
var tmpFilter = &history.Filter{Rules: []history.Rule{{cond("size", "big")}}}

// ChangeEntities makes one of the changes named in kinds every interval
// or so, until ctx ends: the entity and rule changes an operator makes
// while the cluster is in trouble.
func (w *Workload) ChangeEntities(ctx context.Context, kinds []string, interval time.Duration) {
	p, rng := w.process()
	var tmpSubs, tmpQueues []string
	var flipRules []string
	long := false
	for n := 0; ctx.Err() == nil; n++ {
		pause(ctx, interval/2+time.Duration(rng.Int64N(int64(interval))))
		if ctx.Err() != nil {
			return
		}
		switch kinds[rng.IntN(len(kinds))] {
		case ChangeSubscriptions:
			if len(tmpSubs) >= 2 || (len(tmpSubs) > 0 && rng.IntN(2) == 0) {
				name := tmpSubs[0]
				// One that failed to go stays, to be drained at the end
				// or deleted later.
				if w.remove(ctx, p, subPath(name), func(ctx context.Context) error {
					return w.Admin.DeleteSubscription(ctx, Topic, name)
				}) {
					tmpSubs = tmpSubs[1:]
					w.entities.remove("", name)
				}
				continue
			}
			s := subscription{name: fmt.Sprintf("tmp-%d-%d", p, n), filter: tmpFilter}
			settings := s.settings()
			if w.change(ctx, p, history.CreateEntity, subPath(s.name), &settings, func(ctx context.Context) error {
				return w.createSubscription(ctx, s)
			}) != history.Fail {
				tmpSubs = append(tmpSubs, s.name)
				w.entities.add("", s.name)
			}
		case ChangeRules:
			if len(flipRules) > 0 && rng.IntN(2) == 0 {
				name := flipRules[len(flipRules)-1]
				flipRules = flipRules[:len(flipRules)-1]
				w.change(ctx, p, history.DeleteRule, subPath(Flip), nil, func(ctx context.Context) error {
					return w.Admin.DeleteRule(ctx, Topic, Flip, name)
				})
				continue
			}
			name := fmt.Sprintf("r%d", n)
			rule := sqlRule(name, history.Rule{cond("color", "green"), cond("region", "eu")})
			if w.change(ctx, p, history.CreateRule, subPath(Flip), nil, func(ctx context.Context) error {
				_, err := w.Admin.CreateRule(ctx, Topic, Flip, rule)
				return err
			}) != history.Fail {
				flipRules = append(flipRules, name)
			}
		case ChangeSettings:
			long = !long
			s := workSettings
			if long {
				s.LockDuration, s.MaxDeliveryCount = int64(lockDuration+time.Second), s.MaxDeliveryCount+1
			}
			w.change(ctx, p, history.UpdateEntity, WorkQueue, &s, func(ctx context.Context) error {
				_, err := w.Admin.UpdateQueue(ctx, WorkQueue, &admin.QueueProperties{
					LockDuration: durationpb.New(time.Duration(s.LockDuration)), MaxDeliveryCount: proto.Int32(s.MaxDeliveryCount)})
				return err
			})
		case ChangeQueues:
			if len(tmpQueues) > 0 {
				name := tmpQueues[0]
				if w.remove(ctx, p, name, func(ctx context.Context) error { return w.Admin.DeleteQueue(ctx, name) }) {
					tmpQueues = tmpQueues[1:]
					w.entities.remove(name, "")
				}
				continue
			}
			name := fmt.Sprintf("tmpq-%d-%d", p, n)
			s := history.Settings{LockDuration: int64(time.Minute), MaxDeliveryCount: 10}
			if w.change(ctx, p, history.CreateEntity, name, &s, func(ctx context.Context) error {
				_, err := w.Admin.CreateQueue(ctx, name, &admin.QueueProperties{PartitionCount: proto.Uint32(2)})
				return err
			}) == history.Fail {
				continue
			}
			tmpQueues = append(tmpQueues, name)
			w.entities.add(name, "")
			if sender, err := w.Client.NewSender(name, nil); err == nil {
				for i := range 3 {
					id := fmt.Sprintf("%s-m%d", name, i)
					w.send(ctx, p, sender, name, &client.Message{MessageID: id, Body: []byte(id)}, history.Op{})
				}
			}
		}
	}
}

// remove records the deletion of an entity and reports whether it may be
// gone: the delete may have happened, or found nothing to delete.
func (w *Workload) remove(ctx context.Context, p int, path string, f func(ctx context.Context) error) bool {
	var err error
	o := w.change(ctx, p, history.DeleteEntity, path, nil, func(ctx context.Context) error {
		err = f(ctx)
		return err
	})
	return o != history.Fail || notFound(err)
}

// change records one entity change.
func (w *Workload) change(ctx context.Context, p int, what, path string, s *history.Settings, f func(ctx context.Context) error) history.Outcome {
	return w.record(ctx, p, history.Op{Kind: history.Change, Change: what, Entity: path, Settings: s},
		func(ctx context.Context, _ *history.Op) error { return f(ctx) })
}
