package partition_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// bodyOf is the body of message i of these tests: long enough to be kept
// in the log, different for every message.
func bodyOf(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("body %04d ", i)), 8) }

// sendBodies sends messages from..to-1, one entry each.
func sendBodies(t *testing.T, p *partition.Partition, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{MessageId: fmt.Sprint(i), Body: bodyOf(i)})); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// checkBodies peeks the queue on p and checks it holds messages from..to-1
// with their bodies.
func checkBodies(t *testing.T, p *partition.Partition, from, to int) {
	t.Helper()
	msgs := peekAll(t, p)
	if len(msgs) != to-from {
		t.Fatalf("%d messages, want %d", len(msgs), to-from)
	}
	for i, m := range msgs {
		if want := bodyOf(from + i); !bytes.Equal(m.GetMessage().GetBody(), want) {
			t.Fatalf("message %s has body %q, want %q", m.GetMessage().GetMessageId(), m.GetMessage().GetBody(), want)
		}
	}
}

// completeBodies receives the queue's messages from..to-1 on p, checks
// their bodies and completes them.
func completeBodies(t *testing.T, p *partition.Partition, from, to int) {
	t.Helper()
	ctx := context.Background()
	got, err := p.Receive(ctx, lockCmd(int32(to-from+1)), 0)
	if err != nil || len(got) != to-from {
		t.Fatalf("receive: %d messages, %v; want %d", len(got), err, to-from)
	}
	for i, m := range got {
		if want := bodyOf(from + i); !bytes.Equal(m.GetMessage().GetBody(), want) {
			t.Fatalf("received body %q, want %q", m.GetMessage().GetBody(), want)
		}
		if _, err := p.Apply(ctx, completeCmd(m.LockToken)); err != nil {
			t.Fatalf("complete %d: %v", m.SequenceNumber, err)
		}
	}
}

func oldestBodyRef(p *partition.Partition) uint64 {
	var oldest uint64
	p.ReadApplied(func(e *engine.Engine) { oldest = e.OldestBodyRef() })
	return oldest
}

func TestBodiesStayInTheLogThroughCompactionAndRestart(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *partition.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 1<<20, 2
	})
	l := c.leader()
	p := c.replicas[l]
	configure(t, p, nil)
	sendBodies(t, p, 0, 10)
	completeBodies(t, p, 0, 10)
	sendBodies(t, p, 10, 30)
	pin := oldestBodyRef(p)
	if pin == 0 {
		t.Fatal("no body is kept in the log")
	}
	// Raft compacts its log after the snapshot; the entries that hold the
	// bodies of the messages still queued stay.
	if err := p.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	g, err := c.logs[l].Group(c.name)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := g.FirstIndex(); first != pin {
		t.Fatalf("after the snapshot the log starts at %d, want %d: the oldest entry a queued message's body is in", first, pin)
	}
	checkBodies(t, p, 10, 30)

	// The whole partition restarts from its snapshots and logs.
	for i := range c.replicas {
		c.shutDown(i)
	}
	for i := range c.replicas {
		c.start(i)
	}
	p = c.replicas[c.leader()]
	checkBodies(t, p, 10, 30)
	completeBodies(t, p, 10, 30)
	if pin := oldestBodyRef(p); pin != 0 {
		t.Fatalf("every message is completed, yet entry %d is kept for a body", pin)
	}
}

func TestAReplicaRebuiltFromASnapshotGetsTheBodiesWithIt(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *partition.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 1<<20, 2
	})
	l := c.leader()
	p := c.replicas[l]
	configure(t, p, nil)
	ctx := context.Background()
	// Enough entries before the oldest one still needed that the log
	// starts after what a new replica needs: it must take a snapshot.
	sendBodies(t, p, 0, 5)
	completeBodies(t, p, 0, 5)
	sendBodies(t, p, 5, 25)
	if err := p.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// A follower loses its disk and comes back empty.
	f := (l + 1) % 3
	c.shutDown(f)
	if err := os.RemoveAll(c.dirs[f]); err != nil {
		t.Fatal(err)
	}
	c.start(f)
	c.converged()
	if n := c.replicas[f].Raft().Stats()["last_snapshot_index"]; n == "0" {
		t.Fatal("the rebuilt replica caught up without a snapshot")
	}
	// It holds the bodies itself (its log has none of those entries).
	if pin := oldestBodyRef(c.replicas[f]); pin != 0 {
		t.Fatalf("the rebuilt replica refers to entry %d of a log it never had", pin)
	}
	await.Until(t, 10*time.Second, "the rebuilt replica to lead", func() bool {
		if c.replicas[f].IsLeader() {
			return true
		}
		if l := c.leader(); l != f {
			c.replicas[l].HandOver(ctx, nodeID(f))
		}
		return false
	})
	checkBodies(t, c.replicas[c.leader()], 5, 25)
}

func TestAWaitingReceiveGetsTheBodyOfTheSendItRodeOn(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.replicas[c.leader()]
	configure(t, p, nil)
	type outcome struct {
		msgs []*raftbusv1.ReceivedMessage
		err  error
	}
	got := make(chan outcome, 1)
	go func() {
		msgs, err := p.Receive(context.Background(), lockCmd(1), 10*time.Second)
		got <- outcome{msgs, err}
	}()
	await.Until(t, 5*time.Second, "the receive to wait", func() bool { return p.Riders() > 0 })
	sendBodies(t, p, 7, 8)
	r := <-got
	if r.err != nil || len(r.msgs) != 1 || !bytes.Equal(r.msgs[0].GetMessage().GetBody(), bodyOf(7)) {
		t.Fatalf("the waiting receive got %v (%v)", r.msgs, r.err)
	}
}
