package partition_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// testClock is a node clock a test sets: a time, or an error while the
// clock is not trusted.
type testClock struct {
	mu  sync.Mutex
	now time.Time
	err error
}

func (c *testClock) Now() (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now, c.err
}

func (c *testClock) set(now time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.err = now, err
}

func enqueuedTimes(t *testing.T, p *partition.Partition) []time.Time {
	t.Helper()
	var out []time.Time
	for _, m := range peekAll(t, p) {
		out = append(out, m.GetEnqueuedTime().AsTime())
	}
	return out
}

// TestLeaderStampsTheNodeClockNotTheWallClock: the time in a command is
// the node's clock (which bounds what a wrong wall clock can do), and a
// clock that steps back does not take stamps back with it.
func TestLeaderStampsTheNodeClockNotTheWallClock(t *testing.T) {
	then := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := &testClock{now: then}
	c := newTestCluster(t, 3, func(cfg *partition.Config) { cfg.Clock = clk })
	p := c.replicas[c.leader()]
	configure(t, p, nil)
	ctx := context.Background()
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("a")})); err != nil {
		t.Fatal(err)
	}
	clk.set(then.Add(-time.Hour), nil)
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("b")})); err != nil {
		t.Fatal(err)
	}
	got := enqueuedTimes(t, p)
	if len(got) != 2 || !got[0].Equal(then) || !got[1].Equal(then) {
		t.Fatalf("enqueued at %v, want both at %v (the node clock, never going back)", got, then)
	}
}

// TestLeaderProposesNothingWhileItsClockIsUntrusted: a leader whose clock
// its peers do not vouch for refuses operations with a retryable
// SERVER_BUSY, and nothing reaches the log.
func TestLeaderProposesNothingWhileItsClockIsUntrusted(t *testing.T) {
	clk := &testClock{now: time.Now()}
	c := newTestCluster(t, 3, func(cfg *partition.Config) { cfg.Clock = clk })
	l := c.leader()
	p := c.replicas[l]
	configure(t, p, nil)
	ctx := context.Background()
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("before")})); err != nil {
		t.Fatal(err)
	}
	applied := p.Info().AppliedIndex

	clk.set(time.Time{}, errors.New("this node's clock is not trusted: skewed"))
	_, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("while skewed")}))
	var pe *partition.Error
	if !errors.As(err, &pe) || pe.Reason != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY || !pe.Retryable {
		t.Fatalf("send while skewed: %v, want a retryable SERVER_BUSY", err)
	}
	if _, err := p.Receive(ctx, lockCmd(1), 0); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("receive while skewed: %v, want SERVER_BUSY", err)
	}
	if got := p.Info().AppliedIndex; got != applied {
		t.Fatalf("applied index moved from %d to %d while the clock was untrusted", applied, got)
	}
	if _, err := p.Now(); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("Now while skewed: %v, want SERVER_BUSY", err)
	}

	clk.set(time.Now(), nil)
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("after")})); err != nil {
		t.Fatalf("send once the clock is trusted again: %v", err)
	}
	if n := len(peekAll(t, p)); n != 2 {
		t.Fatalf("%d messages, want the 2 sent while the clock was trusted", n)
	}
}
