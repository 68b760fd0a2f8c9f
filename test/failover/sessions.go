package failover

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/test/history"
)

// ProcessSessions accepts the next available session of SessionQueue,
// reads its state (the sequence number of the last message processed),
// receives its messages up to five at a time, completes each in order and
// writes its number to the state, renewing the session lock as it goes
// (which keeps the locks of the messages received under it), until ctx
// ends. It gives a session up after two empty receives, at the first
// failure, and after ten receives so that sessions change hands.
func (w *Workload) ProcessSessions(ctx context.Context) {
	p, _ := w.process()
	for n := 0; ctx.Err() == nil; n++ {
		hold := fmt.Sprintf("p%d-%d", p, n)
		var s *client.SessionReceiver
		o := w.record(ctx, p, history.Op{Kind: history.Accept, Entity: SessionQueue, Lock: hold}, func(ctx context.Context, op *history.Op) error {
			var err error
			if s, err = w.Client.AcceptNextSessionForQueue(ctx, SessionQueue, nil); err == nil {
				op.SessionID, op.LockedUntil = s.SessionID(), w.since(s.LockedUntil())
			}
			return err
		})
		if o != history.OK {
			continue
		}
		w.serveSession(ctx, p, hold, s)
		w.record(context.Background(), p, history.Op{Kind: history.CloseSession, Entity: SessionQueue, SessionID: s.SessionID(), Lock: hold},
			func(ctx context.Context, _ *history.Op) error { return s.Close(ctx) })
	}
}

func (w *Workload) serveSession(ctx context.Context, p int, hold string, s *client.SessionReceiver) {
	base := history.Op{Entity: SessionQueue, SessionID: s.SessionID(), Lock: hold}
	state := func(kind history.Kind, value string, f func(ctx context.Context, op *history.Op) error) history.Outcome {
		op := base
		op.Kind, op.State = kind, value
		return w.record(ctx, p, op, f)
	}
	if state(history.GetState, "", func(ctx context.Context, op *history.Op) error {
		b, err := s.GetSessionState(ctx, nil)
		op.State = string(b)
		return err
	}) != history.OK {
		return
	}
	// Give the session up now and then, so that it changes hands.
	for idle, batches := 0, 0; ctx.Err() == nil && idle < 2 && batches < 10; batches++ {
		// Renew while half the lock is left, so that it never runs out
		// while the session is served.
		if time.Until(s.LockedUntil()) < lockDuration/2 {
			op := base
			op.Kind = history.RenewSession
			if w.record(ctx, p, op, func(ctx context.Context, op *history.Op) error {
				err := s.RenewSessionLock(ctx, nil)
				op.LockedUntil = w.since(s.LockedUntil())
				return err
			}) != history.OK {
				return
			}
		}
		var msgs []*client.ReceivedMessage
		op := base
		op.Kind = history.Receive
		if w.record(ctx, p, op, func(ctx context.Context, op *history.Op) error {
			var err error
			msgs, err = s.ReceiveMessages(ctx, 5, &client.ReceiveMessagesOptions{MaxWaitTime: 500 * time.Millisecond})
			op.Messages = w.deliveries(msgs)
			return err
		}) != history.OK {
			return
		}
		if len(msgs) == 0 {
			idle++
		}
		for _, m := range msgs {
			if w.settle(ctx, p, history.Complete, SessionQueue, hold, m, func(ctx context.Context, _ *history.Op) error {
				return s.CompleteMessage(ctx, m, nil)
			}) != history.OK {
				return
			}
			seq := strconv.FormatInt(m.SequenceNumber, 10)
			if state(history.SetState, seq, func(ctx context.Context, _ *history.Op) error {
				return s.SetSessionState(ctx, []byte(seq), nil)
			}) != history.OK {
				return
			}
		}
	}
}
