package failover

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/test/history"
)

// receive records one PeekLock (or ReceiveAndDelete) receive of up to max
// messages from r, which reads path.
func (w *Workload) receive(ctx context.Context, p int, r *client.Receiver, path, mode string, max int, wait time.Duration) []*client.ReceivedMessage {
	var msgs []*client.ReceivedMessage
	w.record(ctx, p, history.Op{Kind: history.Receive, Entity: path, Mode: mode}, func(ctx context.Context, op *history.Op) error {
		var err error
		msgs, err = r.ReceiveMessages(ctx, max, &client.ReceiveMessagesOptions{MaxWaitTime: wait})
		op.Messages = w.deliveries(msgs)
		return err
	})
	return msgs
}

// Consume receives from WorkQueue in PeekLock mode until ctx ends. It
// completes most messages; it abandons some, lets the locks of others
// expire (so that redelivery and MaxDeliveryCount are exercised), defers
// some and then receives them by sequence number and completes them,
// dead-letters some, and renews the lock of some before completing.
func (w *Workload) Consume(ctx context.Context) { w.consume(ctx, WorkQueue) }

// ConsumeForwarded consumes ForwardTarget as Consume does WorkQueue.
func (w *Workload) ConsumeForwarded(ctx context.Context) { w.consume(ctx, ForwardTarget) }

func (w *Workload) consume(ctx context.Context, path string) {
	p, rng := w.process()
	r, err := w.Client.NewReceiverForQueue(path, nil)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		for _, m := range w.receive(ctx, p, r, path, "", 20, time.Second) {
			w.handle(ctx, p, rng, r, path, m)
		}
	}
}

// handle settles one PeekLock delivery of path the way the dice say.
func (w *Workload) handle(ctx context.Context, p int, rng *rand.Rand, r *client.Receiver, path string, m *client.ReceivedMessage) {
	complete := func(m *client.ReceivedMessage) history.Outcome {
		return w.settle(ctx, p, history.Complete, path, "", m, func(ctx context.Context, _ *history.Op) error { return r.CompleteMessage(ctx, m, nil) })
	}
	switch k := rng.IntN(100); {
	case k < 78:
		complete(m)
	case k < 86:
		w.settle(ctx, p, history.Abandon, path, "", m, func(ctx context.Context, _ *history.Op) error { return r.AbandonMessage(ctx, m, nil) })
	case k < 90:
		// Let the lock expire: the message comes back.
	case k < 95:
		if w.settle(ctx, p, history.Defer, path, "", m, func(ctx context.Context, _ *history.Op) error { return r.DeferMessage(ctx, m, nil) }) == history.Fail {
			return
		}
		var got []*client.ReceivedMessage
		w.record(ctx, p, history.Op{Kind: history.Receive, Entity: path, Deferred: true}, func(ctx context.Context, op *history.Op) error {
			var err error
			got, err = r.ReceiveDeferredMessages(ctx, []int64{m.SequenceNumber}, nil)
			op.Messages = w.deliveries(got)
			return err
		})
		for _, d := range got {
			complete(d)
		}
	case k < 97:
		w.settle(ctx, p, history.DeadLetter, path, "", m, func(ctx context.Context, _ *history.Op) error {
			reason := "workload"
			return r.DeadLetterMessage(ctx, m, &client.DeadLetterOptions{Reason: &reason})
		})
	default:
		o := w.settle(ctx, p, history.RenewLock, path, "", m, func(ctx context.Context, op *history.Op) error {
			err := r.RenewMessageLock(ctx, m, nil)
			op.LockedUntil = w.since(m.LockedUntil)
			return err
		})
		if o == history.OK {
			complete(m)
		}
	}
}

// ConsumeAndDelete receives from PlainQueue in ReceiveAndDelete mode until
// ctx ends: each message returned is consumed, and one whose receive had
// an unknown outcome may be gone unseen.
func (w *Workload) ConsumeAndDelete(ctx context.Context) {
	p, rng := w.process()
	r, err := w.Client.NewReceiverForQueue(PlainQueue, &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		w.receive(ctx, p, r, PlainQueue, history.ReceiveAndDelete, 1+rng.IntN(10), time.Second)
		// Slower than the producer at times, so that some messages expire
		// while they wait.
		pause(ctx, time.Duration(rng.IntN(100))*time.Millisecond)
	}
}

// ConsumeTopic receives from Topic's subscriptions in turn in PeekLock
// mode until ctx ends, settling as Consume does.
func (w *Workload) ConsumeTopic(ctx context.Context) {
	p, rng := w.process()
	receivers := make(map[string]*client.Receiver)
	for n := 0; ctx.Err() == nil; n++ {
		_, names := w.entities.snapshot()
		name := names[n%len(names)]
		r := receivers[name]
		if r == nil {
			var err error
			if r, err = w.Client.NewReceiverForSubscription(Topic, name, nil); err != nil {
				return
			}
			receivers[name] = r
		}
		for _, m := range w.receive(ctx, p, r, subPath(name), "", 20, 200*time.Millisecond) {
			w.handle(ctx, p, rng, r, subPath(name), m)
		}
	}
}
