package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/service"
	"github.com/raftbus/raftbus/internal/await"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A receive across partitions looks by node: this node's partitions are
// one source, each other leader another; a node asked by another
// (forwarding refused) serves only the partitions it leads; and awaiting
// messages at a leader sees them without taking them.
func TestReceiveAcrossLooksByNode(t *testing.T) {
	c := newTestCluster(t, 3)
	const parts = 6
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "spread", PartitionCount: proto.Uint32(parts)})
	for id := range uint32(parts) {
		c.leaderOf("spread", id)
	}
	nd := c.nodes[0]
	e := nd.meta.fsm.Entity("spread")
	// The shape of the sources (this node, then each other leader once)
	// is service.TestSourcesAreThisNodeFirstThenEachOtherLeaderOnce's;
	// here the node asked must know every partition's leader.
	await.Until(t, 10*time.Second, "a known leader of every partition", func() bool {
		for id := range uint32(parts) {
			r := nd.replica(e, id)
			if r == nil {
				return false
			}
			if addr, _ := r.p.Leader(); addr == "" {
				return false
			}
		}
		return true
	})

	// A message in a partition led by another node than the one asked.
	var p uint32
	var key string
	asked := 0
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if id := raftbusv1.PartitionForKey(k, parts); c.leaderOf("spread", id) != asked {
			p, key = id, k
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := c.nodes[c.leaderOf("spread", p)]
	if ok, err := awaitMessagesAt(ctx, leader, leader.addr, 0); ok || err != nil {
		t.Fatalf("the leader of partition %d awaits messages in an empty queue: %v, %v", p, ok, err)
	}
	if _, err := c.client(0).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "spread", Messages: []*raftbusv1.Message{{MessageId: "m", PartitionKey: key}}}); err != nil {
		t.Fatal(err)
	}
	// Awaiting at the leader, from the node asked, sees the message and
	// takes nothing (the receive below gets it).
	if ok, err := awaitMessagesAt(ctx, c.nodes[asked], leader.addr, 10*time.Second); !ok || err != nil {
		t.Fatalf("awaiting messages at the leader of partition %d: %v, %v", p, ok, err)
	}
	own, err := c.client(asked).msg.Receive(metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward),
		&raftbusv1.ReceiveRequest{EntityPath: "spread", MaxMessages: 10, MaxWait: durationpb.New(0)})
	if len(own.GetMessages()) != 0 || (err != nil && reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER) {
		t.Fatalf("node %d, asked not to forward, answered %v, %v; the message is in partition %d, led by node %d", asked, own.GetMessages(), err, p, c.leaderOf("spread", p))
	}
	got, err := c.client(asked).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "spread", MaxMessages: 10, MaxWait: durationpb.New(10 * time.Second)})
	if err != nil || len(got.GetMessages()) != 1 || got.GetMessages()[0].GetMessage().GetMessageId() != "m" || got.GetMessages()[0].GetPartitionId() != p {
		t.Fatalf("receive across partitions at node %d: %v, %v; want m from partition %d", asked, got.GetMessages(), err, p)
	}
}

// awaitMessagesAt asks, from node from, the node at addr to wait up to
// wait for a message in queue "spread" (NodeService.AwaitMessages, as a
// receive across partitions does).
func awaitMessagesAt(ctx context.Context, from *Node, addr string, wait time.Duration) (bool, error) {
	var available bool
	err := serviceNode{from}.Call(ctx, addr, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		resp, err := clusterv1.NewNodeServiceClient(conn).AwaitMessages(ctx, &clusterv1.AwaitMessagesRequest{EntityPath: "spread", MaxWait: durationpb.New(wait)})
		available = resp.GetAvailable()
		return err
	})
	return available, err
}

// A receive across partitions gathers what the partitions its node leads
// hold, within its bounds, and a replay of it returns the same messages.
func TestReceiveAcrossGathersTheNodesPartitions(t *testing.T) {
	c := newTestCluster(t, 1)
	const parts = 4
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "wide", PartitionCount: proto.Uint32(parts)})
	for id := range uint32(parts) {
		c.leaderOf("wide", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	perPartition := map[uint32]int{}
	for i := 0; len(perPartition) < parts || i < 2*parts; i++ {
		key := fmt.Sprintf("k%d", i)
		if perPartition[raftbusv1.PartitionForKey(key, parts)] == 2 {
			continue
		}
		if _, err := c.client(0).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "wide", Messages: []*raftbusv1.Message{{MessageId: key, PartitionKey: key}}}); err != nil {
			t.Fatal(err)
		}
		perPartition[raftbusv1.PartitionForKey(key, parts)]++
	}

	id := []byte("gather-1")
	got, err := c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "wide", MaxMessages: 5, ReceiveId: id})
	if err != nil || len(got.GetMessages()) != 5 {
		t.Fatalf("receive of at most 5 across %d partitions of 2 messages: %d messages, %v; want 5", parts, len(got.GetMessages()), err)
	}
	from := map[uint32]bool{}
	for _, m := range got.GetMessages() {
		from[m.GetPartitionId()] = true
	}
	if len(from) < 3 {
		t.Fatalf("5 messages from partitions %v: not gathered", from)
	}
	replay, err := c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "wide", ReceiveId: id, Replay: true})
	if err != nil || len(replay.GetMessages()) != 5 {
		t.Fatalf("replay: %d messages, %v; want the same 5", len(replay.GetMessages()), err)
	}
	rest, err := c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "wide", MaxMessages: 100})
	if err != nil || len(rest.GetMessages()) != 2*parts-5 {
		t.Fatalf("the next receive: %d messages, %v; want the other %d", len(rest.GetMessages()), err, 2*parts-5)
	}
}

// A receive repeated (or replayed) after the locks it took ended, as after
// a failover that outlasted the lock duration, took effect unseen: it is
// answered MESSAGE_LOCK_LOST, not with nothing, and changes nothing.
func TestRepeatAfterTheLocksEndedReportsThemLost(t *testing.T) {
	c := newTestCluster(t, 1)
	const parts = 4
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "short", PartitionCount: proto.Uint32(parts), LockDuration: durationpb.New(time.Second)})
	for id := range uint32(parts) {
		c.leaderOf("short", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const sent = 8
	for i := range sent {
		key := fmt.Sprintf("k%d", i)
		if _, err := c.client(0).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "short", Messages: []*raftbusv1.Message{{MessageId: key, PartitionKey: key}}}); err != nil {
			t.Fatal(err)
		}
	}
	across := []byte("across-1")
	got, err := c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "short", MaxMessages: 3, ReceiveId: across})
	if err != nil || len(got.GetMessages()) == 0 {
		t.Fatalf("receive across partitions: %v, %v", got, err)
	}
	one := uint32(0)
	if _, err := c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "short", PartitionId: &one, ReceiveId: []byte("one-1"), MaxMessages: 1}); err != nil {
		t.Fatal(err)
	}
	// Await the end of the locks: until then a replay gets the messages.
	var replayErr error
	await.Until(t, 15*time.Second, "the locks of the receive to end", func() bool {
		_, replayErr = c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "short", ReceiveId: across, Replay: true})
		return replayErr != nil
	})
	if info := errorInfo(t, replayErr); info.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST || info.GetRetryable() {
		t.Fatalf("replay after the locks ended: %v, want a non-retryable MESSAGE_LOCK_LOST", replayErr)
	}
	// A repeat of a receive from one partition, as the SDK makes after an
	// unknown outcome, likewise. Its lock was taken after the others, so
	// it may end a moment later: until then a repeat gets the message
	// again and changes nothing.
	await.Until(t, 15*time.Second, "the lock of the receive from one partition to end", func() bool {
		_, err = c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "short", PartitionId: &one, ReceiveId: []byte("one-1"), MaxMessages: 1})
		return err != nil
	})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST {
		t.Fatalf("repeat after the lock ended: %v, want MESSAGE_LOCK_LOST", err)
	}
	// Every message is there to receive, those locked before delivered once.
	var redelivered int
	for n := 0; n < sent; {
		rest, err := c.client(0).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "short", MaxMessages: sent, MaxWait: durationpb.New(time.Second)})
		if err != nil || len(rest.GetMessages()) == 0 {
			t.Fatalf("receive after the repeats: %v, %v (%d of %d)", rest, err, n, sent)
		}
		for _, m := range rest.GetMessages() {
			if m.GetDeliveryCount() == 2 {
				redelivered++
			}
		}
		n += len(rest.GetMessages())
	}
	if want := len(got.GetMessages()) + 1; redelivered != want {
		t.Fatalf("%d messages delivered before, want %d", redelivered, want)
	}
}

// A receive across partitions takes first from the partition whose
// message has waited longest, as the node asked sees it, even when that
// partition is led by another node and one it leads has a message too
// (one that came more than service.LocalLead later):
// looking at its own partitions first let the partitions of nodes that
// fewer receivers reached fall seconds behind.
func TestReceiveAcrossTakesTheOldestMessageFirst(t *testing.T) {
	c := newTestCluster(t, 3)
	const parts = 6
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "aged", PartitionCount: proto.Uint32(parts)})
	leaders := make([]int, parts)
	for id := range uint32(parts) {
		leaders[id] = c.leaderOf("aged", id)
	}
	// The node asked leads a partition (for the newer message), and
	// another node leads one (for the older).
	asked, pOld, pNew := -1, -1, -1
	for id, l := range leaders {
		if asked == -1 || l == asked {
			asked, pNew = l, id
		}
	}
	for id, l := range leaders {
		if l != asked {
			pOld = id
		}
	}
	if pOld == -1 {
		t.Fatalf("node %d leads all %d partitions; the test needs one led elsewhere", asked, parts)
	}
	keyFor := func(p int) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("k%d", i); raftbusv1.PartitionForKey(k, parts) == uint32(p) {
				return k
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	send := func(id string, p int) *raftbusv1.SendResult {
		resp, err := c.client(asked).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "aged", Messages: []*raftbusv1.Message{{MessageId: id, PartitionKey: keyFor(p)}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetResults()[0]
	}
	old := send("old", pOld)
	nd := c.nodes[asked]
	e := nd.meta.fsm.Entity("aged")
	await.Until(t, 10*time.Second, "the asked node's replica of the older message's partition to hold it", func() bool {
		_, ok := nd.replica(e, uint32(pOld)).p.OldestAvailable("aged", raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED)
		return ok
	})
	// The newer message must come more than service.LocalLead later:
	// within it, the node's own partition goes first.
	await.Until(t, 5*time.Second, "the clock to pass the older message's enqueue time by the lead", func() bool {
		return time.Now().UnixMilli() > old.GetEnqueuedTime().AsTime().UnixMilli()+service.LocalLead.Milliseconds()
	})
	send("new", pNew)

	for _, want := range []string{"old", "new"} {
		got, err := c.client(asked).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "aged", MaxMessages: 1, MaxWait: durationpb.New(10 * time.Second)})
		if err != nil || len(got.GetMessages()) != 1 || got.GetMessages()[0].GetMessage().GetMessageId() != want {
			t.Fatalf("receive of one message at node %d (older in partition %d led by node %d, newer in partition %d led here): %v, %v; want %q",
				asked, pOld, leaders[pOld], pNew, got.GetMessages(), err, want)
		}
	}
}
