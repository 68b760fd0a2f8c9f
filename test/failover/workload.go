// Package failover runs client workloads against a raftbus cluster while
// faults are injected, recording every operation and its outcome in a
// history (test/history) for the checker (test/checker). The workloads use
// the Go SDK as an application would: producers with unique MessageIds that
// resend after an unknown outcome, peek-lock consumers that complete,
// abandon or let locks expire, session workers that process each session in
// order, and scheduled messages, some cancelled.
package failover

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/test/history"
)

// Workload drives one cluster through the SDK.
type Workload struct {
	Client       *client.Client
	History      *history.Recorder
	Queue        string // partitioned, duplicate detection on
	SessionQueue string // requires sessions, duplicate detection on
	// OpTimeout bounds each operation, so that a paused node turns into
	// unknown outcomes rather than a stuck run.
	OpTimeout time.Duration
	Seed      uint64

	procs atomic.Int32
}

// outcome classifies an operation's error.
func outcome(err error) (history.Outcome, string) {
	if err == nil {
		return history.OK, ""
	}
	var ce *client.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		(errors.As(err, &ce) && ce.Code == client.CodeOutcomeUnknown) {
		return history.Unknown, err.Error()
	}
	return history.Fail, err.Error()
}

func (w *Workload) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.OpTimeout)
}

// record runs f as one operation of process p and writes it to the
// history with its outcome.
func (w *Workload) record(ctx context.Context, p int, op history.Op, f func(ctx context.Context, op *history.Op) error) history.Outcome {
	op.Process = p
	op.Start = w.History.Now()
	octx, cancel := w.op(ctx)
	err := f(octx, &op)
	cancel()
	op.End = w.History.Now()
	op.Outcome, op.Error = outcome(err)
	w.History.Record(op)
	return op.Outcome
}

// Produce sends messages with unique ids to the queue (and, with session
// set, to the session queue under a few session ids) until ctx ends. A
// send whose outcome is unknown is sent again with the same MessageId:
// duplicate detection makes that safe.
func (w *Workload) Produce(ctx context.Context, sessions bool) {
	p := int(w.procs.Add(1))
	rng := rand.New(rand.NewPCG(w.Seed, uint64(p)))
	path := w.Queue
	if sessions {
		path = w.SessionQueue
	}
	sender, err := w.Client.NewSender(path, nil)
	if err != nil {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("p%d-%d", p, n)
		m := &client.Message{MessageID: id, Body: []byte(id)}
		if sessions {
			m.SessionID = fmt.Sprintf("s%d", rng.IntN(4))
		}
		for ctx.Err() == nil {
			o := w.record(ctx, p, history.Op{Kind: history.Send, Entity: path, MessageID: id, SessionID: m.SessionID},
				func(ctx context.Context, op *history.Op) error {
					var res client.SendResult
					err := sender.SendMessage(ctx, m, &client.SendMessageOptions{Result: &res})
					op.Seq, op.Partition, op.Duplicate = res.SequenceNumber, res.PartitionID, res.Duplicate
					return err
				})
			if o != history.Unknown {
				break
			}
		}
	}
}

// Schedule schedules messages a second or two ahead and cancels about a
// third of them, until ctx ends.
func (w *Workload) Schedule(ctx context.Context) {
	p := int(w.procs.Add(1))
	rng := rand.New(rand.NewPCG(w.Seed, uint64(p)))
	sender, err := w.Client.NewSender(w.Queue, nil)
	if err != nil {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("sched%d-%d", p, n)
		at := time.Now().Add(time.Second + time.Duration(rng.IntN(2000))*time.Millisecond)
		var seq int64
		o := w.record(ctx, p, history.Op{Kind: history.Schedule, Entity: w.Queue, MessageID: id, ScheduledFor: w.History.Since(at)},
			func(ctx context.Context, op *history.Op) error {
				seqs, err := sender.ScheduleMessages(ctx, []*client.Message{{MessageID: id, Body: []byte(id)}}, at, nil)
				if err == nil && len(seqs) == 1 {
					seq, op.Seq = seqs[0], seqs[0]
					op.Partition = uint32(uint64(seq) >> 48)
				}
				return err
			})
		if o == history.OK && rng.IntN(3) == 0 {
			w.record(ctx, p, history.Op{Kind: history.Cancel, Entity: w.Queue, MessageID: id, Seq: seq},
				func(ctx context.Context, _ *history.Op) error {
					return sender.CancelScheduledMessages(ctx, []int64{seq}, nil)
				})
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(50+rng.IntN(200)) * time.Millisecond):
		}
	}
}

// Consume receives from the queue in peek-lock mode until ctx ends and
// completes most messages; it abandons some and lets the locks of others
// expire, so that redelivery and MaxDeliveryCount are exercised.
func (w *Workload) Consume(ctx context.Context) {
	p := int(w.procs.Add(1))
	rng := rand.New(rand.NewPCG(w.Seed, uint64(p)))
	r, err := w.Client.NewReceiverForQueue(w.Queue, nil)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		var msgs []*client.ReceivedMessage
		w.record(ctx, p, history.Op{Kind: history.Receive, Entity: w.Queue}, func(ctx context.Context, op *history.Op) error {
			var err error
			msgs, err = r.ReceiveMessages(ctx, 20, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
			op.Messages = deliveries(msgs)
			return err
		})
		for _, m := range msgs {
			switch k := rng.IntN(20); {
			case k < 17:
				w.settle(ctx, p, history.Complete, w.Queue, m, func(ctx context.Context) error { return r.CompleteMessage(ctx, m, nil) })
			case k < 19:
				w.settle(ctx, p, history.Abandon, w.Queue, m, func(ctx context.Context) error { return r.AbandonMessage(ctx, m, nil) })
			default:
				// Let the lock expire: the message comes back.
			}
		}
	}
}

// ProcessSessions accepts the next available session, receives its
// messages one at a time and completes them, until ctx ends.
func (w *Workload) ProcessSessions(ctx context.Context) {
	p := int(w.procs.Add(1))
	for ctx.Err() == nil {
		var s *client.SessionReceiver
		actx, cancel := w.op(ctx)
		s, err := w.Client.AcceptNextSessionForQueue(actx, w.SessionQueue, nil)
		cancel()
		if err != nil {
			continue
		}
		for idle := 0; ctx.Err() == nil && idle < 2; {
			var msgs []*client.ReceivedMessage
			o := w.record(ctx, p, history.Op{Kind: history.Receive, Entity: w.SessionQueue, SessionID: s.SessionID()},
				func(ctx context.Context, op *history.Op) error {
					var err error
					msgs, err = s.ReceiveMessages(ctx, 5, &client.ReceiveMessagesOptions{MaxWaitTime: 500 * time.Millisecond})
					op.Messages = deliveries(msgs)
					return err
				})
			if o != history.OK {
				break
			}
			if len(msgs) == 0 {
				idle++
			}
			failed := false
			for _, m := range msgs {
				if w.settle(ctx, p, history.Complete, w.SessionQueue, m, func(ctx context.Context) error { return s.CompleteMessage(ctx, m, nil) }) != history.OK {
					failed = true
					break
				}
			}
			if failed {
				break
			}
		}
		cctx, cancel := w.op(context.Background())
		s.Close(cctx)
		cancel()
	}
}

func (w *Workload) settle(ctx context.Context, p int, kind history.Kind, path string, m *client.ReceivedMessage, f func(context.Context) error) history.Outcome {
	return w.record(ctx, p, history.Op{Kind: kind, Entity: path, MessageID: m.MessageID, SessionID: m.SessionID, Seq: m.SequenceNumber, Partition: m.PartitionID},
		func(ctx context.Context, _ *history.Op) error { return f(ctx) })
}

func deliveries(msgs []*client.ReceivedMessage) []history.Delivery {
	out := make([]history.Delivery, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, history.Delivery{MessageID: m.MessageID, Seq: m.SequenceNumber, Partition: m.PartitionID,
			SessionID: m.SessionID, DeliveryCount: int32(m.DeliveryCount), Enqueued: m.EnqueuedTime.UnixMilli()})
	}
	return out
}

// deadLettered records dead-lettered messages by the number they were
// acknowledged with: the broker gives a message a new sequence number in
// the dead-letter sub-queue and keeps the first as EnqueuedSequenceNumber.
func deadLettered(msgs []*client.ReceivedMessage) []history.Delivery {
	out := deliveries(msgs)
	for i, m := range msgs {
		out[i].Seq = m.EnqueuedSequenceNumber
	}
	return out
}

// Drain records what is left in path (main queue, or its dead-letter
// sub-queue) after the run, by peeking every message: active, locked,
// scheduled and deferred alike.
func (w *Workload) Drain(ctx context.Context, path string, dlq bool) error {
	opts := &client.ReceiverOptions{}
	if dlq {
		opts.SubQueue = client.SubQueueDeadLetter
	}
	r, err := w.Client.NewReceiverForQueue(path, opts)
	if err != nil {
		return err
	}
	op := history.Op{Kind: history.Drain, Entity: path, DLQ: dlq, Start: w.History.Now()}
	for {
		msgs, err := r.PeekMessages(ctx, 500, nil)
		var ce *client.Error
		if errors.As(err, &ce) && ce.Retryable && ctx.Err() == nil {
			// A node is still coming back: the cluster is healed, not idle.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("drain %s: %w", path, err)
		}
		if len(msgs) == 0 {
			break
		}
		if dlq {
			op.Messages = append(op.Messages, deadLettered(msgs)...)
		} else {
			op.Messages = append(op.Messages, deliveries(msgs)...)
		}
	}
	op.End = w.History.Now()
	w.History.Record(op)
	return nil
}
