package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/proxy"
)

// TestADeletedTargetNeverGetsAMessageItMayHaveAcceptedDeadLettered: the
// target accepts a forwarded message but its answers are lost, and it is
// deleted before the forwarder hears of it. That message may have been
// delivered, so it stays in transfer; a message sent after the deletion,
// which no forwarder sent, is dead-lettered in the source.
func TestADeletedTargetNeverGetsAMessageItMayHaveAcceptedDeadLettered(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "dst"})
	preferred := func(name string) string {
		return c.nodes[0].meta.fsm.Entity(name).GetPartitions()[0].GetNodeIds()[0]
	}
	// A source whose partition another node than the target's leads.
	src := ""
	for i := 0; src == ""; i++ {
		if i == 6 {
			t.Fatal("every source placed its leader with the target's")
		}
		name := fmt.Sprintf("src%d", i)
		createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: name, ForwardTo: "dst"})
		if preferred(name) != preferred("dst") {
			src = name
		}
	}
	for _, name := range []string{src, "dst"} {
		await.Until(t, 30*time.Second, "the preferred node to lead "+name, func() bool {
			return c.nodes[c.leaderOf(name, 0)].cfg.NodeID == preferred(name)
		})
	}
	source, target := c.leaderOf(src, 0), c.leaderOf("dst", 0)
	// The source's leader reaches the other nodes through proxies that
	// lose their answers (a call to the target's leader through the third
	// node too).
	var proxies []*proxy.Proxy
	for i, nd := range c.nodes {
		if i == source {
			continue
		}
		p := proxy.Start(t, nd.Addr())
		cc, err := grpc.NewClient(nd.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(p.Dialer()))
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[source].peers.Replace(nd.Addr(), cc)
		p.DropResponses(1 << 20)
		proxies = append(proxies, p)
	}

	sendOne(t, c.client(source), src, "m1")
	await.Until(t, 30*time.Second, "the target to accept m1", func() bool {
		return runtime(t, c.client(target), "dst").GetActiveMessageCount() == 1
	})
	dst := c.nodes[target].meta.fsm.Entity("dst")
	if _, err := c.client(target).admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: "dst"}); err != nil {
		t.Fatal(err)
	}
	// Once no node runs the target's partition, nothing can reach it.
	await.Until(t, 30*time.Second, "the target's replicas closed", func() bool {
		for _, nd := range c.nodes {
			if nd.replica(dst, 0) != nil {
				return false
			}
		}
		return true
	})
	for _, p := range proxies {
		p.DropResponses(0)
	}
	sendOne(t, c.client(source), src, "m2")
	await.Until(t, 30*time.Second, "m2 dead-lettered", func() bool {
		return runtime(t, c.client(source), src).GetDeadLetterMessageCount() >= 1
	})
	time.Sleep(time.Second) // rounds of the forwarder, which must leave m1 alone
	if rt := runtime(t, c.client(source), src); rt.GetTransferMessageCount() != 1 || rt.GetDeadLetterMessageCount() != 1 {
		t.Fatalf("source counts %v: want m1 in transfer and m2 dead-lettered", rt)
	}
	dl, err := c.client(source).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: src, SubQueue: raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, MaxMessages: 10})
	if err != nil || len(dl.GetMessages()) != 1 || dl.GetMessages()[0].GetMessage().GetMessageId() != "m2" || dl.GetMessages()[0].GetDeadLetterReason() != "TransferFailed" {
		t.Fatalf("dead letters %v, %v: want m2 alone", dl, err)
	}
}
