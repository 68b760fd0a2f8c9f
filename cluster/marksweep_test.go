package cluster

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestATargetForgetsTheMarksOfDeletedSources: a queue that received
// forwarded messages keeps a mark per source partition; once a source is
// deleted, and also when it is created again under its name (a new
// stream), the mark of the old one goes.
func TestATargetForgetsTheMarksOfDeletedSources(t *testing.T) {
	c := newTestClusterWith(t, 1, func(cfg *Config) { cfg.forgetStreamsAfter = time.Millisecond })
	cl := c.client(0)
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "dst"})
	marks := func() int {
		r := c.nodes[0].replica(c.nodes[0].meta.fsm.Entity("dst"), 0)
		n := -1
		if r != nil {
			r.p.ReadApplied(func(en *engine.Engine) { n = en.TransferMarkCount() })
		}
		return n
	}
	forwardOne := func(src, id string) {
		createQueue(t, cl, &raftbusv1.QueueProperties{Name: src, PartitionCount: proto.Uint32(2), ForwardTo: "dst"})
		sendOne(t, cl, src, id)
		awaitForwarded(t, c, 0, src)
	}
	forwardOne("a", "a1")
	forwardOne("b", "b1")
	if n := marks(); n != 2 {
		t.Fatalf("%d marks after transfers from two sources, want 2", n)
	}
	deleteQueue(t, cl, "a")
	await.Until(t, 30*time.Second, "the deleted source's mark forgotten", func() bool { return marks() == 1 })

	// Created again: the new source's stream is another; the old one's
	// mark goes once the new one is seen.
	deleteQueue(t, cl, "b")
	forwardOne("b", "b2")
	await.Until(t, 30*time.Second, "the old incarnation's mark forgotten", func() bool { return marks() == 1 })
	if got := drain(t, cl, "dst", 3, 20*time.Second); len(got) != 3 {
		t.Fatalf("the target got %v", got)
	}
}

func deleteQueue(t testing.TB, c clients, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: name}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}
