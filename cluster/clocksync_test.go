package cluster

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// leading lists the partition groups node nd leads.
func leading(nd *Node) []string {
	nd.mu.RLock()
	defer nd.mu.RUnlock()
	var out []string
	for name, r := range nd.replicas {
		if r.p.IsLeader() {
			out = append(out, name)
		}
	}
	return out
}

func (c *testCluster) waitClocks(state raftbusv1.ClockState, nodes ...int) {
	c.t.Helper()
	await.Until(c.t, 15*time.Second, fmt.Sprintf("clocks of %v %v", nodes, state), func() bool {
		for _, i := range nodes {
			if c.nodes[i].clocks.state() != state {
				return false
			}
		}
		return true
	})
}

// TestASkewedNodeHandsOverAndItsClockNeverReachesTheLog: a node whose
// clock jumps 11 minutes ahead finds itself the odd one out, hands over
// every group it leads, and while it stays skewed its time never reaches
// a partition: enqueue times and lock expiry follow the healthy clocks,
// duplicate detection and TTL windows are not cut short, and enqueue
// times never go back. Once its clock is fixed it leads again.
func TestASkewedNodeHandsOverAndItsClockNeverReachesTheLog(t *testing.T) {
	c := newTestCluster(t, 3)
	const lockDuration = 30 * time.Second
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{
		Name: "orders", PartitionCount: proto.Uint32(3), LockDuration: durationpb.New(lockDuration),
		RequiresDuplicateDetection: proto.Bool(true), DuplicateDetectionHistoryTimeWindow: durationpb.New(5 * time.Minute),
	})
	for id := range uint32(3) {
		c.leaderOf("orders", id)
	}
	c.waitClocks(raftbusv1.ClockState_CLOCK_STATE_HEALTHY, 0, 1, 2)
	start := time.Now()
	sendOne(t, c.client(0), "orders", "before")
	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.SendResponse, error) {
		return c.client(0).msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "orders", Messages: []*raftbusv1.Message{
			{MessageId: "ttl", Body: []byte("lives 3 minutes"), TimeToLive: durationpb.New(3 * time.Minute)}}})
	})

	// Skew the node leading partition 0.
	victim := c.leaderOf("orders", 0)
	c.clocks[victim].SetOffset(11 * time.Minute)
	skewed := time.Now()
	nd := c.nodes[victim]
	await.Until(t, 20*time.Second, "the skewed node to hand over every group", func() bool {
		return nd.clocks.state() == raftbusv1.ClockState_CLOCK_STATE_SKEWED && !nd.meta.isLeader() && len(leading(nd)) == 0
	})
	t.Logf("n%d handed over every group %v after its clock jumped", victim+1, time.Since(skewed).Round(time.Millisecond))

	// Traffic through every node, the skewed one included: it forwards.
	// It must not lead again for more than a moment (an election it wins
	// ends in a handover) and stamps nothing meanwhile.
	var led, longest time.Duration
	var since time.Time
	for i := range 60 {
		sendOne(t, c.client(i%3), "orders", fmt.Sprintf("m%d", i))
		if len(leading(nd)) > 0 || nd.meta.isLeader() {
			if since.IsZero() {
				since = time.Now()
			}
			led = time.Since(since)
			longest = max(longest, led)
		} else {
			since = time.Time{}
		}
	}
	if longest > 3*time.Second {
		t.Fatalf("the skewed node led for %v at a stretch", longest)
	}
	if dup := sendOne(t, c.client(victim), "orders", "before"); !dup.GetDuplicate() {
		t.Fatalf("a resend of %q within the duplicate detection window was enqueued again (%v): the window was cut short", "before", dup)
	}

	// Receive everything through the skewed node and look at the times.
	received := time.Now()
	got := make(map[string]*raftbusv1.ReceivedMessage)
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 62 && time.Now().Before(deadline) {
		resp, err := c.client(victim).msg.Receive(context.Background(), &raftbusv1.ReceiveRequest{
			EntityPath: "orders", MaxMessages: 100, MaxWait: durationpb.New(time.Second)})
		if err != nil {
			if !isRetryable(err) {
				t.Fatalf("receive: %v", err)
			}
			continue
		}
		for _, m := range resp.GetMessages() {
			got[m.GetMessage().GetMessageId()] = m
		}
	}
	if len(got) != 62 || got["ttl"] == nil {
		t.Fatalf("received %d of 62 messages (ttl: %v): a message expired early or was lost", len(got), got["ttl"] != nil)
	}
	bound := nd.clocks.monitor.MaxOffset() + time.Second // and the test's own latency
	now := time.Now()
	byPartition := make(map[uint32][]*raftbusv1.ReceivedMessage)
	for id, m := range got {
		enq := m.GetEnqueuedTime().AsTime()
		if enq.Before(start.Add(-bound)) || enq.After(now.Add(bound)) {
			t.Errorf("%s enqueued at %v, outside [%v, %v]: a skewed clock reached the log", id, enq, start, now)
		}
		until := m.GetLockedUntil().AsTime()
		if until.Before(received.Add(lockDuration-bound)) || until.After(now.Add(lockDuration+bound)) {
			t.Errorf("%s locked until %v, want about %v from now (%v)", id, until, lockDuration, now)
		}
		byPartition[m.GetPartitionId()] = append(byPartition[m.GetPartitionId()], m)
	}
	for p, msgs := range byPartition {
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].GetSequenceNumber() < msgs[j].GetSequenceNumber() })
		for i := 1; i < len(msgs); i++ {
			if msgs[i].GetEnqueuedTime().AsTime().Before(msgs[i-1].GetEnqueuedTime().AsTime()) {
				t.Errorf("partition %d: enqueue time went back from %v to %v", p, msgs[i-1].GetEnqueuedTime().AsTime(), msgs[i].GetEnqueuedTime().AsTime())
			}
		}
	}
	if got["ttl"].GetExpiresAt().AsTime().Sub(got["ttl"].GetEnqueuedTime().AsTime()) != 3*time.Minute {
		t.Errorf("ttl message expires at %v, enqueued at %v", got["ttl"].GetExpiresAt().AsTime(), got["ttl"].GetEnqueuedTime().AsTime())
	}

	// Fixed, the node is trusted again and gets its partitions back.
	c.clocks[victim].SetOffset(0)
	c.waitClocks(raftbusv1.ClockState_CLOCK_STATE_HEALTHY, victim)
	await.Until(t, 30*time.Second, "the healed node to lead its preferred partition again", func() bool { return len(leading(nd)) > 0 })
}
