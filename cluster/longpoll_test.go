package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/internal/await"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestFirstAcrossServesWhatAnyPartitionHasWhileAnotherIsDown(t *testing.T) {
	down := apierror.Busy("partition 0 has no reachable leader")
	asked := 0
	got, err := firstAcross([]uint32{0, 1, 2}, time.Second, func(id uint32, wait time.Duration) (string, bool, error) {
		asked++
		switch id {
		case 0:
			return "", false, down
		case 2:
			return "message of 2", true, nil
		}
		return "", false, nil
	})
	if err != nil || got != "message of 2" || asked != 3 {
		t.Fatalf("got %q, %v after %d asks; want partition 2's message", got, err, asked)
	}
}

func TestFirstAcrossEndsEmptyWhenTheOthersHaveNothing(t *testing.T) {
	got, err := firstAcross([]uint32{1, 0}, 120*time.Millisecond, func(id uint32, wait time.Duration) (string, bool, error) {
		if id == 0 {
			return "", false, apierror.Busy("no leader")
		}
		time.Sleep(wait) // a partition with nothing waits out its slice
		return "", false, nil
	})
	if err != nil || got != "" {
		t.Fatalf("got %q, %v; want an empty answer", got, err)
	}
}

func TestFirstAcrossFailsWhenNoPartitionAnswers(t *testing.T) {
	_, err := firstAcross([]uint32{0, 1}, time.Minute, func(id uint32, wait time.Duration) (string, bool, error) {
		return "", false, apierror.Busy("partition %d has no reachable leader", id)
	})
	if apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("got %v; want SERVER_BUSY at once", err)
	}
}

func TestFirstAcrossStopsAtAnUnknownOutcome(t *testing.T) {
	unknown := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "connection broke")
	asked := 0
	_, err := firstAcross([]uint32{0, 1, 2}, time.Second, func(id uint32, wait time.Duration) (string, bool, error) {
		asked++
		if id == 0 {
			return "", false, unknown
		}
		return "message", true, nil
	})
	if !errors.Is(err, unknown) || asked != 1 {
		t.Fatalf("got %v after %d asks; want the unknown outcome of partition 0, asking no further", err, asked)
	}
}

// A receive across partitions asks those its node leads first: they are
// served without a hop to another node.
func TestPollOrderAsksThePartitionsThisNodeLeadsFirst(t *testing.T) {
	c := newTestCluster(t, 3)
	const parts = 6
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "spread", PartitionCount: proto.Uint32(parts)})
	for id := range uint32(parts) {
		c.leaderOf("spread", id)
	}
	for i, nd := range c.nodes {
		e := nd.meta.fsm.Entity("spread")
		leads := func() map[uint32]bool {
			out := make(map[uint32]bool)
			for id := range uint32(parts) {
				if r := nd.replica(e, id); r != nil && r.p.IsLeader() {
					out[id] = true
				}
			}
			return out
		}
		for checked := 0; checked < 3; {
			before := leads()
			order := nd.pollOrder(e)
			if !maps.Equal(before, leads()) {
				continue // leadership moved meanwhile (leaders are rebalanced)
			}
			checked++
			seen := make(map[uint32]bool)
			for k, id := range order {
				seen[id] = true
				if before[id] != (k < len(before)) {
					t.Fatalf("node %d leads %v; order %v does not ask those first", i, before, order)
				}
			}
			if len(order) != parts || len(seen) != parts {
				t.Fatalf("node %d: order %v is not every partition once", i, order)
			}
		}
	}
}

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
	await.Until(t, 10*time.Second, "a source per node", func() bool {
		srcs := nd.sources(e)
		addrs := map[string]bool{}
		for k, s := range srcs {
			switch {
			case s.local && k != 0, s.addr == nd.addr, !s.local && s.addr == "", addrs[s.addr]:
				return false
			}
			addrs[s.addr] = true
		}
		return len(srcs) <= 3
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
	if ok, err := leader.awaitLocal(ctx, leader.meta.fsm.Entity("spread"), "spread", raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, 0); ok || err != nil {
		t.Fatalf("the leader of partition %d awaits messages in an empty queue: %v, %v", p, ok, err)
	}
	if _, err := c.client(0).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "spread", Messages: []*raftbusv1.Message{{MessageId: "m", PartitionKey: key}}}); err != nil {
		t.Fatal(err)
	}
	// Awaiting at the leader, from the node asked, sees the message and
	// takes nothing (the receive below gets it).
	if ok, err := c.nodes[asked].awaitAt(ctx, leader.addr, &enginev1.Lock{EntityPath: "spread"}, 10*time.Second); !ok || err != nil {
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
