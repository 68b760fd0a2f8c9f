package failover

import (
	"context"
	"fmt"
	"time"

	"github.com/raftbus/raftbus/client"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/history"
)

// send sends m to path as one recorded operation, again while its outcome
// is unknown: with a MessageId, duplicate detection (where the entity has
// it) makes that safe; without, it is at-least-once delivery, and the
// checker counts the copies as allowed duplicates.
func (w *Workload) send(ctx context.Context, p int, sender *client.Sender, path string, m *client.Message, base history.Op) {
	base.Kind, base.Entity, base.SessionID = history.Send, path, m.SessionID
	base.MessageID, base.Anonymous = m.MessageID, m.MessageID == ""
	if base.Anonymous {
		base.MessageID = string(m.Body)
	}
	if m.TimeToLive != nil {
		base.TTL = int64(*m.TimeToLive)
	}
	for ctx.Err() == nil {
		o := w.record(ctx, p, base, func(ctx context.Context, op *history.Op) error {
			var res client.SendResult
			err := sender.SendMessage(ctx, m, &client.SendMessageOptions{Result: &res})
			op.Seq, op.Partition, op.Duplicate = res.SequenceNumber, res.PartitionID, res.Duplicate
			if !res.EnqueuedTime.IsZero() {
				op.Enqueued = res.EnqueuedTime.UnixMilli()
			}
			return err
		})
		if o != history.Unknown {
			return
		}
	}
}

// Produce sends messages with unique MessageIds to WorkQueue (or, with
// sessions, to SessionQueue under a few session ids) until ctx ends.
func (w *Workload) Produce(ctx context.Context, sessions bool) {
	p, rng := w.process()
	path := WorkQueue
	if sessions {
		path = SessionQueue
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
		w.send(ctx, p, sender, path, m, history.Op{})
	}
}

// ProduceForwarded sends messages with unique MessageIds to ForwardQueue,
// which forwards them to ForwardTarget, until ctx ends.
func (w *Workload) ProduceForwarded(ctx context.Context) {
	p, _ := w.process()
	sender, err := w.Client.NewSender(ForwardQueue, nil)
	if err != nil {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("f%d-%d", p, n)
		w.send(ctx, p, sender, ForwardQueue, &client.Message{MessageID: id, Body: []byte(id)}, history.Op{})
	}
}

// ProduceAnonymous sends messages without a MessageId to PlainQueue (the
// body is the workload's id), a third of them with a time to live of a
// few seconds, until ctx ends.
func (w *Workload) ProduceAnonymous(ctx context.Context) {
	p, rng := w.process()
	sender, err := w.Client.NewSender(PlainQueue, nil)
	if err != nil {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("a%d-%d", p, n)
		m := &client.Message{Body: []byte(id)}
		if rng.IntN(3) == 0 {
			ttl := time.Duration(500+rng.IntN(3000)) * time.Millisecond
			m.TimeToLive = &ttl
		}
		w.send(ctx, p, sender, PlainQueue, m, history.Op{})
		pause(ctx, time.Duration(rng.IntN(20))*time.Millisecond)
	}
}

// ProduceTopic sends messages with unique MessageIds to Topic with the
// properties its subscriptions filter on, some with a time to live, until
// ctx ends.
func (w *Workload) ProduceTopic(ctx context.Context) {
	p, rng := w.process()
	sender, err := w.Client.NewSender(Topic, nil)
	if err != nil {
		return
	}
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("t%d-%d", p, n)
		props := map[string]string{"color": pick("red", "blue", "green"), "size": pick("big", "small"),
			"region": pick("eu", "us"), subject: pick("audit", "order", "")}
		m := &client.Message{MessageID: id, Body: []byte(id), Subject: props[subject], ApplicationProperties: map[string]any{}}
		if props[subject] == "" {
			delete(props, subject)
		}
		for k, v := range props {
			if k != subject {
				m.ApplicationProperties[k] = v
			}
		}
		if rng.IntN(4) == 0 {
			ttl := time.Duration(1000+rng.IntN(4000)) * time.Millisecond
			m.TimeToLive = &ttl
		}
		w.send(ctx, p, sender, Topic, m, history.Op{Props: props})
		pause(ctx, time.Duration(10+rng.IntN(30))*time.Millisecond)
	}
}

// Schedule schedules messages a second or two ahead on WorkQueue and
// cancels about a third of them, until ctx ends.
func (w *Workload) Schedule(ctx context.Context) {
	p, rng := w.process()
	sender, err := w.Client.NewSender(WorkQueue, nil)
	if err != nil {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("sched%d-%d", p, n)
		at := time.Now().Add(time.Second + time.Duration(rng.IntN(2000))*time.Millisecond)
		var seq int64
		o := w.record(ctx, p, history.Op{Kind: history.Schedule, Entity: WorkQueue, MessageID: id, ScheduledFor: w.History.Since(at)},
			func(ctx context.Context, op *history.Op) error {
				seqs, err := sender.ScheduleMessages(ctx, []*client.Message{{MessageID: id, Body: []byte(id)}}, at, nil)
				if err == nil && len(seqs) == 1 {
					seq, op.Seq = seqs[0], seqs[0]
					op.Partition = raftbusv1.PartitionOfSequence(seq)
				}
				return err
			})
		// Without a number (a broker bug the checker reports), there is
		// nothing to cancel.
		if o == history.OK && seq != 0 && rng.IntN(3) == 0 {
			w.record(ctx, p, history.Op{Kind: history.Cancel, Entity: WorkQueue, MessageID: id, Seq: seq},
				func(ctx context.Context, _ *history.Op) error {
					return sender.CancelScheduledMessages(ctx, []int64{seq}, nil)
				})
		}
		pause(ctx, time.Duration(50+rng.IntN(200))*time.Millisecond)
	}
}
