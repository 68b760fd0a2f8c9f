package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// quickQuiesce makes partitions quiesce after a fraction of a second.
func quickQuiesce(cfg *Config) { cfg.QuiesceAfter = 300 * time.Millisecond }

// awaitQuiet waits until every running node holds the partitions of the
// queues closed (dormant) and none open.
func (c *testCluster) awaitQuiet(queues ...string) {
	c.t.Helper()
	await.Until(c.t, 30*time.Second, fmt.Sprintf("%v quiet on every node", queues), func() bool {
		for _, nd := range c.nodes {
			if nd == nil {
				continue
			}
			for _, q := range queues {
				e := nd.meta.fsm.Entity(q)
				if e == nil {
					return false
				}
				for id := range e.GetPartitions() {
					if nd.replica(e, uint32(id)) != nil || !nd.isDormant(groupName(e, uint32(id))) {
						return false
					}
				}
			}
		}
		return true
	})
}

// isOpen reports whether node i runs a replica of partition 0 of queue.
func (c *testCluster) isOpen(i int, queue string) bool {
	e := c.nodes[i].meta.fsm.Entity(queue)
	return e != nil && c.nodes[i].replica(e, 0) != nil
}

func receiveOne(t *testing.T, cl clients, queue string) *raftbusv1.ReceivedMessage {
	t.Helper()
	resp := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.ReceiveResponse, error) {
		return cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: queue, MaxMessages: 1, MaxWait: durationpb.New(5 * time.Second)})
	})
	if len(resp.GetMessages()) != 1 {
		t.Fatalf("receive from %s: %d messages, want 1", queue, len(resp.GetMessages()))
	}
	return resp.GetMessages()[0]
}

func complete(t *testing.T, cl clients, queue string, m *raftbusv1.ReceivedMessage) {
	t.Helper()
	lock := &raftbusv1.MessageLock{EntityPath: queue, PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}
	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.CompleteResponse, error) {
		return cl.msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: lock})
	})
}

// Idle partitions close on every node, their goroutines go with them, and
// the next request, on any node, opens them again with what they held.
func TestIdlePartitionsCloseAndOpenForTheNextRequest(t *testing.T) {
	c := newTestClusterWith(t, 3, quickQuiesce)
	const n = 6
	var queues []string
	for i := range n {
		q := fmt.Sprintf("idle-%d", i)
		queues = append(queues, q)
		createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: q})
		sendOne(t, c.client(0), q, "m-"+q)
	}
	open := goruntime.NumGoroutine()
	c.awaitQuiet(queues...)
	// Each open replica runs raft's goroutines (at least three on a
	// follower) and the partition's own three.
	if quiet := goruntime.NumGoroutine(); quiet > open-n*3*4 {
		t.Errorf("goroutines: %d with %d queues open, %d with them quiet; want at least %d fewer", open, n, quiet, n*3*4)
	}
	// Quiet, they cost the reconciler nothing: its rounds go on without
	// looking over every partition again (one look may still come, after
	// the last replica closed), and the node stays ready.
	for i, nd := range c.nodes {
		rounds, looks := nd.rounds.Load(), nd.looks.Load()
		await.Until(t, 20*time.Second, "ten reconciler rounds", func() bool { return nd.rounds.Load() >= rounds+10 })
		if more := nd.looks.Load() - looks; more > 2 {
			t.Errorf("node %d: %d of 10 reconciler rounds looked over every partition while all were quiet", i, more)
		}
		if err := nd.Ready(); err != nil {
			t.Errorf("node %d not ready with its partitions quiet: %v", i, err)
		}
	}

	// Any node serves them: the one a request reaches opens its replica
	// and stands for election; its peers open theirs for the vote.
	for i, q := range queues {
		cl := c.client(i % 3)
		m := receiveOne(t, cl, q)
		if got := m.GetMessage().GetMessageId(); got != "m-"+q {
			t.Fatalf("%s: received %q, want m-%s", q, got, q)
		}
		complete(t, cl, q, m)
	}
	// Done with, they close again, and hold nothing.
	c.awaitQuiet(queues...)
	for _, q := range queues {
		resp := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.PeekResponse, error) {
			return c.client(1).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: q, MaxMessages: 10})
		})
		if len(resp.GetMessages()) != 0 {
			t.Fatalf("%s: %d messages left after complete", q, len(resp.GetMessages()))
		}
	}
}

// A partition with work due soon stays open; with work due later it
// quiesces, and the node of its last leader opens it when the work is due:
// a lock expires on time with no request to make it.
func TestQuietPartitionOpensWhenWorkIsDue(t *testing.T) {
	c := newTestClusterWith(t, 3, func(cfg *Config) { cfg.QuiesceAfter = 2 * time.Second })
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "locked", LockDuration: durationpb.New(time.Second)})
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "later", LockDuration: durationpb.New(5 * time.Second)})
	for _, q := range []string{"locked", "later"} {
		sendOne(t, c.client(0), q, "m1")
		receiveOne(t, c.client(0), q) // and never settled
	}
	// The lock of "locked" expires before the partition may quiesce, and
	// with it the window of its receipt: it quiesces after that.
	c.awaitQuiet("later")
	e := c.nodes[0].meta.fsm.Entity("later")
	await.Until(t, 20*time.Second, "the lock of the quiet partition to expire with no request", func() bool {
		for _, nd := range c.nodes {
			if r := nd.replica(e, 0); r != nil {
				expired := false
				r.p.ReadApplied(func(en *engine.Engine) {
					rt, err := en.RuntimeProperties("later")
					expired = err == nil && rt.GetLockedMessageCount() == 0 && rt.GetActiveMessageCount() == 1
				})
				if expired {
					return true
				}
			}
		}
		return false
	})
	c.awaitQuiet("locked", "later")
	for _, q := range []string{"locked", "later"} {
		m := receiveOne(t, c.client(1), q)
		if m.GetDeliveryCount() != 2 {
			t.Fatalf("%s: delivery count %d, want 2 (the first lock expired)", q, m.GetDeliveryCount())
		}
	}
}

// Quiet partitions stay closed across a restart of their node, and serve
// when one node of three is gone.
func TestQuietPartitionsSurviveRestartAndNodeLoss(t *testing.T) {
	c := newTestClusterWith(t, 3, quickQuiesce)
	queues := []string{"a", "b", "c"}
	for _, q := range queues {
		createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: q})
		sendOne(t, c.client(0), q, "first")
	}
	c.awaitQuiet(queues...)

	// The whole cluster restarts: every node leaves them closed.
	var addrs []string
	for i := range c.nodes {
		addrs = append(addrs, c.stop(i))
	}
	for i := range c.nodes {
		c.start(i, addrs[i])
	}
	for i, nd := range c.nodes {
		await.Until(t, 10*time.Second, fmt.Sprintf("node %d to note its quiet replicas", i), func() bool {
			for _, q := range queues {
				e := nd.meta.fsm.Entity(q)
				if e == nil || !nd.isDormant(groupName(e, 0)) {
					return false
				}
			}
			return true
		})
	}
	for i, nd := range c.nodes {
		// A few rounds of the reconciler, which opens what has work due.
		from := nd.rounds.Load()
		await.Until(t, 10*time.Second, "three rounds of the reconciler", func() bool { return nd.rounds.Load() >= from+3 })
		if w := nd.wakes.Load(); w != 0 {
			t.Fatalf("node %d opened %d quiet partitions after a restart, with no request", i, w)
		}
	}

	// One node gone: the other two open each partition and serve it.
	c.stop(2)
	for _, q := range queues {
		sendOne(t, c.client(0), q, "second")
		for _, want := range []string{"first", "second"} {
			m := receiveOne(t, c.client(1), q)
			if got := m.GetMessage().GetMessageId(); got != want {
				t.Fatalf("%s: received %q, want %q", q, got, want)
			}
			complete(t, c.client(1), q, m)
		}
	}
}

// Deleting a queue whose partitions are quiet removes their data.
func TestDeletingAQuietQueueRemovesItsData(t *testing.T) {
	c := newTestClusterWith(t, 3, quickQuiesce)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "gone"})
	sendOne(t, c.client(0), "gone", "m1")
	c.awaitQuiet("gone")
	e := c.nodes[0].meta.fsm.Entity("gone")
	group := groupName(e, 0)
	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.DeleteQueueResponse, error) {
		return c.client(0).admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: "gone"})
	})
	for i, nd := range c.nodes {
		dir := nd.replicaDir(group)
		await.Until(t, 10*time.Second, fmt.Sprintf("node %d to remove %s", i, filepath.Base(dir)), func() bool {
			_, err := os.Stat(dir)
			return os.IsNotExist(err) && !nd.isDormant(group)
		})
	}
}
