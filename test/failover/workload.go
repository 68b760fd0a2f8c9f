// Package failover runs client workloads against a raftbus cluster while
// faults are injected, recording every operation and its outcome in a
// history (test/history) for the checker (test/checker). The workloads use
// the Go SDK as applications would: producers with unique MessageIds that
// resend after an unknown outcome, producers without MessageIds on an
// entity without duplicate detection, peek-lock consumers that complete,
// abandon, defer, dead-letter, renew or let locks expire, ReceiveAndDelete
// consumers, session workers that keep their place in the session state,
// scheduled messages (some cancelled), messages with a time to live, a
// topic whose subscriptions filter with SQL and correlation rules, and
// entity and rule changes made during the faults.
package failover

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/history"
)

// Workload drives one cluster through the SDK. Create its entities with
// Setup before starting its processes.
type Workload struct {
	Client  *client.Client
	Admin   *admin.Client
	History *history.Recorder
	// OpTimeout bounds each operation, so that a paused node turns into
	// unknown outcomes rather than a stuck run.
	OpTimeout time.Duration
	Seed      uint64
	// NodeTLS, for a cluster with TLS, presents a node certificate: the
	// drain compares replicas through the node service.
	NodeTLS *tls.Config

	procs atomic.Int32
	// entities are the queues and subscriptions that may exist, for the
	// drain: ChangeEntities adds and removes.
	entities entitySet
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

// process numbers a new workload process and gives it its random source.
func (w *Workload) process() (int, *rand.Rand) {
	p := int(w.procs.Add(1))
	return p, rand.New(rand.NewPCG(w.Seed, uint64(p)))
}

// record runs f as one operation of process p and writes it to the
// history with its outcome. Once ctx has ended it runs nothing (and says
// the operation failed): an operation never started is no operation.
func (w *Workload) record(ctx context.Context, p int, op history.Op, f func(ctx context.Context, op *history.Op) error) history.Outcome {
	if ctx.Err() != nil {
		return history.Fail
	}
	op.Process = p
	op.Start = w.History.Now()
	octx, cancel := context.WithTimeout(ctx, w.OpTimeout)
	err := f(octx, &op)
	cancel()
	op.End = w.History.Now()
	op.Outcome, op.Error = outcome(err)
	var ce *client.Error
	if errors.As(err, &ce) {
		op.Code = ce.Code.String()
	}
	w.History.Record(op)
	if op.Outcome != history.OK {
		// A process that retries at once would spin on a node that is
		// down; an application backs off.
		pause(ctx, 50*time.Millisecond)
	}
	return op.Outcome
}

// since converts a time the broker reported to the recorder's clock (0 for
// none).
func (w *Workload) since(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return w.History.Since(t)
}

// identity is the workload's id of a message: its MessageId, or its body
// when it was sent without one.
func identity(m *client.ReceivedMessage) string {
	if m.MessageID != "" {
		return m.MessageID
	}
	return string(m.Body)
}

func token(m *client.ReceivedMessage) string { return hex.EncodeToString(m.LockToken[:]) }

var states = map[client.MessageState]string{
	client.MessageStateActive: "active", client.MessageStateDeferred: "deferred", client.MessageStateScheduled: "scheduled",
}

func (w *Workload) deliveries(msgs []*client.ReceivedMessage) []history.Delivery {
	out := make([]history.Delivery, 0, len(msgs))
	for _, m := range msgs {
		d := history.Delivery{MessageID: identity(m), Seq: m.SequenceNumber, Partition: m.PartitionID,
			SessionID: m.SessionID, DeliveryCount: int32(m.DeliveryCount), Enqueued: m.EnqueuedTime.UnixMilli(),
			LockedUntil: w.since(m.LockedUntil), State: states[m.State], Reason: m.DeadLetterReason}
		if m.LockToken != [16]byte{} {
			d.LockToken = token(m)
		}
		if m.TimeToLive > 0 && m.TimeToLive < 24*time.Hour {
			d.Expires = w.since(m.ExpiresAt)
		}
		out = append(out, d)
	}
	return out
}

// settle records a settlement (or lock renewal) of m, under the session
// hold named hold when m came through a session.
func (w *Workload) settle(ctx context.Context, p int, kind history.Kind, path, hold string, m *client.ReceivedMessage, f func(context.Context, *history.Op) error) history.Outcome {
	return w.record(ctx, p, history.Op{Kind: kind, Entity: path, MessageID: identity(m), SessionID: m.SessionID, Seq: m.SequenceNumber,
		Partition: m.PartitionID, LockToken: token(m), Lock: hold}, f)
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// retryable reports whether err says the cluster is not ready yet.
func retryable(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Retryable
}

// until repeats f while it fails with a retryable error, until ctx ends:
// for set-up and final reads, made while nodes may still be coming back.
func until(ctx context.Context, what string, f func(ctx context.Context) error) error {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(actx)
		cancel()
		if err == nil || (!retryable(err) && !errors.Is(err, context.DeadlineExceeded)) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		pause(ctx, min(50*time.Millisecond<<min(attempt, 4), time.Second))
	}
}
