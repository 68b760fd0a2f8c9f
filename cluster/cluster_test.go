package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// leaderOf finds the node index leading partition id of queue.
func (c *testCluster) leaderOf(queue string, id uint32) int {
	c.t.Helper()
	idx := -1
	await.Until(c.t, 10*time.Second, fmt.Sprintf("a leader of %s/%d", queue, id), func() bool {
		for i, nd := range c.nodes {
			if nd == nil {
				continue
			}
			e := nd.meta.fsm.Entity(queue)
			if e == nil {
				continue
			}
			if r := nd.replica(e, id); r != nil && r.p.IsLeader() && r.ready() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

func TestPartitionedQueueSurvivesLeaderLoss(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(1), &raftbusv1.QueueProperties{Name: "orders", PartitionCount: proto.Uint32(3)})

	// Send through one node and receive through another: every node
	// serves every partition, forwarding to its leader.
	sent := make(map[string]bool)
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("m%d", i)
		res := sendOne(t, c.client(2), "orders", id)
		if res.GetPartitionId() > 2 || uint64(res.GetSequenceNumber())>>48 != uint64(res.GetPartitionId()) {
			t.Fatalf("send result %v: sequence number does not name partition %d", res, res.GetPartitionId())
		}
		sent[id] = true
	}
	got := drain(t, c.client(0), "orders", len(sent), 30*time.Second)
	for id := range sent {
		if got[id] == 0 {
			t.Fatalf("message %s lost", id)
		}
	}

	victim := c.leaderOf("orders", 0)
	c.stop(victim)
	survivor := (victim + 1) % 3
	for i := 30; i < 60; i++ {
		id := fmt.Sprintf("m%d", i)
		sendOne(t, c.client(survivor), "orders", id)
		sent[id] = true
	}
	got = drain(t, c.client((victim+2)%3), "orders", 30, 30*time.Second)
	for i := 30; i < 60; i++ {
		if id := fmt.Sprintf("m%d", i); got[id] == 0 {
			t.Fatalf("message %s acknowledged after the leader loss was lost", id)
		}
	}

	rt := retry(t, 10*time.Second, func(ctx context.Context) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
		return c.client(survivor).admin.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: "orders"})
	})
	if n := rt.GetProperties().GetTotalMessageCount(); n != 0 {
		t.Fatalf("%d messages left after every one was completed", n)
	}
}

func TestRestartedNodeCatchesUp(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q"})
	sendOne(t, c.client(0), "q", "before")
	victim := (c.leaderOf("q", 0) + 1) % 3 // a follower
	addr := c.stop(victim)
	alive := (victim + 1) % 3
	for i := 0; i < 20; i++ {
		sendOne(t, c.client(alive), "q", fmt.Sprintf("while-down-%d", i))
	}
	c.start(victim, addr)

	// Caught up means the same state at the same applied index: the
	// leader may apply more (a tick) between two looks, so the two are
	// compared in one look, again until they agree.
	e := c.nodes[alive].meta.fsm.Entity("q")
	await.Until(t, 20*time.Second, "the restarted replica to hold the leader's state", func() bool {
		r, lead := c.nodes[victim].replica(e, 0), c.nodes[c.leaderOf("q", 0)].replica(e, 0)
		if r == nil || lead == nil {
			return false
		}
		return r.p.Info().AppliedIndex == lead.p.Info().AppliedIndex && r.p.Digest() == lead.p.Digest()
	})
	// And the restarted node serves requests again.
	got := drain(t, c.client(victim), "q", 21, 30*time.Second)
	if got["before"] == 0 || got["while-down-19"] == 0 {
		t.Fatalf("messages missing after restart: %v", got)
	}
}

func TestNodesJoiningLaterGetReplicasOfEveryEntity(t *testing.T) {
	c := newTestCluster(t, 1)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "early"})
	sendOne(t, c.client(0), "early", "before")
	c.start(1, "")
	c.start(2, "")
	createQueue(t, c.client(2), &raftbusv1.QueueProperties{Name: "late", PartitionCount: proto.Uint32(2)})

	for id, pl := range c.nodes[0].meta.fsm.Entity("late").GetPartitions() {
		if len(pl.GetNodeIds()) != 3 {
			t.Fatalf("late partition %d placed on %v, want 3 replicas", id, pl.GetNodeIds())
		}
	}
	late := c.nodes[0].meta.fsm.Entity("late")
	for i, nd := range c.nodes {
		await.Until(t, 10*time.Second, fmt.Sprintf("node %d to open its replicas", i), func() bool {
			return nd.replica(late, 0) != nil && nd.replica(late, 1) != nil
		})
	}
	sendOne(t, c.client(1), "late", "x")
	if got := drain(t, c.client(2), "late", 1, 20*time.Second); got["x"] != 1 {
		t.Fatalf("got %v", got)
	}
	info := retry(t, 10*time.Second, func(ctx context.Context) (*raftbusv1.GetClusterInfoResponse, error) {
		return c.client(1).admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
	})
	if len(info.GetNodes()) != 3 || info.GetClusterId() == "" {
		t.Fatalf("cluster info %v: want 3 nodes and a cluster id", info)
	}

	// The queue created on one node gains two replicas once there are
	// nodes for them, and they hold what it held.
	await.Until(t, moveTimeout, "early to have three replicas", func() bool { return c.settled(0, "early", 3, "n1", "n2", "n3") })
	c.awaitGroups("early", 1, 0)
	c.stop(0)
	if got := drain(t, c.client(1), "early", 1, 30*time.Second); got["before"] != 1 {
		t.Fatalf("got %v from early without its first node", got)
	}
}

func TestBadRequestsGetReasonsAndChangeNothing(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "small", MaxMessageSizeInKilobytes: proto.Int64(1)})
	sendOne(t, cl, "small", "keep")
	ctx := context.Background()

	cases := []struct {
		name string
		call func() error
		want raftbusv1.ErrorReason
	}{
		{"unknown entity", func() error {
			_, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "nope", Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND},
		{"malformed path", func() error {
			_, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "bad//path", Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{"malformed subscription path", func() error {
			_, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "small/subscriptions/no way", MaxMessages: 1})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{"malformed name", func() error {
			_, err := cl.admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "bad name!"}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{"duplicate queue", func() error {
			_, err := cl.admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "small"}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS},
		{"oversized message", func() error {
			_, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "small", Messages: []*raftbusv1.Message{{Body: make([]byte, 4096)}}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED},
		{"wrong lock token", func() error {
			_, err := cl.msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: &raftbusv1.MessageLock{EntityPath: "small", LockToken: make([]byte, 16)}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST},
		{"partition out of range", func() error {
			p := uint32(7)
			_, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "small", PartitionId: &p, Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{"receive batch too large", func() error {
			_, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "small", MaxMessages: 5000})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("succeeded")
			}
			info := errorInfo(t, err)
			if info.Reason != tc.want || info.Message == "" || info.TrackingId == "" {
				t.Fatalf("got %v, want reason %v with message and tracking id", info, tc.want)
			}
		})
	}
	if got := drain(t, cl, "small", 1, 10*time.Second); got["keep"] != 1 {
		t.Fatalf("the stored message was disturbed: %v", got)
	}
	_, err := cl.admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{})
	if info := errorInfo(t, err); info.Retryable {
		t.Fatalf("unimplemented feature reported retryable: %v", info)
	}
}

func TestNotLeaderWhenForwardingIsRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q"})
	lead := c.leaderOf("q", 0)
	e := c.nodes[lead].meta.fsm.Entity("q")
	var follower int
	for i := range c.nodes {
		if i != lead && c.nodes[i].replica(e, 0) != nil {
			follower = i
		}
	}
	ctx := contextNoForward()
	_, err := c.client(follower).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "q", Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
	info := errorInfo(t, err)
	if info.Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER || info.GetLeader().GetAddress() != c.nodes[lead].Addr() || !info.Retryable {
		t.Fatalf("got %v, want NOT_LEADER naming %s", info, c.nodes[lead].Addr())
	}
}

func contextNoForward() context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
}

// leaderCounts counts, per node index, the partitions of queue it leads.
func (c *testCluster) leaderCounts(queue string, parts uint32) map[int]int {
	counts := make(map[int]int)
	for id := uint32(0); id < parts; id++ {
		for i, nd := range c.nodes {
			if nd == nil {
				continue
			}
			if e := nd.meta.fsm.Entity(queue); e != nil {
				if r := nd.replica(e, id); r != nil && r.p.IsLeader() {
					counts[i]++
				}
			}
		}
	}
	return counts
}

func TestLeadersSpreadOverNodesAndReturnToARestartedNode(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(6)})
	even := func() bool {
		counts := c.leaderCounts("q", 6)
		return counts[0] == 2 && counts[1] == 2 && counts[2] == 2
	}
	await.Until(t, 30*time.Second, "two partition leaders per node", even)

	addr := c.stop(1)
	await.Until(t, 20*time.Second, "the stopped node's partitions to elect other leaders", func() bool {
		counts := c.leaderCounts("q", 6)
		return counts[0]+counts[2] == 6
	})
	c.start(1, addr)
	await.Until(t, 30*time.Second, "leadership to flow back to the restarted node", even)
}

func TestCreateThroughAnyNodeIsReadyWhenAnswered(t *testing.T) {
	c := newTestCluster(t, 3)
	for i := range c.nodes {
		name := fmt.Sprintf("q%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.client(i).admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: name, PartitionCount: proto.Uint32(3)}})
		cancel()
		if err != nil {
			t.Fatalf("create %s through node %d: %v", name, i, err)
		}
		// Usable at once through any node, without retrying.
		for j := range c.nodes {
			p := uint32(j)
			_, err := c.client((i+j+1)%3).msg.Send(context.Background(), &raftbusv1.SendRequest{EntityPath: name, PartitionId: &p, Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
			if err != nil {
				t.Fatalf("send to %s partition %d right after create: %v", name, p, err)
			}
		}
	}
}
