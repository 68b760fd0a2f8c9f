package test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/cluster/clock"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// clockView is what a node says of every node's clock, and which nodes
// lead the metadata group or a partition.
func clockView(ctx context.Context, admin raftbusv1.AdminServiceClient) (states map[string]raftbusv1.ClockState, leaders map[string]bool, err error) {
	info, err := admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
	if err != nil {
		return nil, nil, err
	}
	states, leaders = make(map[string]raftbusv1.ClockState), make(map[string]bool)
	for _, n := range info.GetNodes() {
		states[n.GetNodeId()] = n.GetClockState()
		if n.GetMetadataLeader() {
			leaders[n.GetNodeId()] = true
		}
	}
	for _, p := range info.GetPartitions() {
		leaders[p.GetLeaderNodeId()] = true
		for _, r := range p.GetReplicas() {
			if r.GetRole() == raftbusv1.ReplicaRole_REPLICA_ROLE_LEADER {
				leaders[r.GetNodeId()] = true
			}
		}
	}
	return states, leaders, nil
}

// TestSkewedNodeNeverLeadsAndItsClockNeverReachesTheLog restarts n3 of
// three raftbusd processes with its clock 11 minutes fast (the fault
// injection variable). It is found skewed, leads nothing (or hands over
// at once an election it wins) while traffic goes through every node
// (itself included: it forwards), and nothing a client sees carries its
// time: enqueue times and lock expiry follow the
// healthy clocks, duplicate detection and TTL windows are intact, and
// enqueue times never go back. Restarted without the offset, it is
// healthy again.
func TestSkewedNodeNeverLeadsAndItsClockNeverReachesTheLog(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	const lockDuration = 30 * time.Second
	createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{
		Name: "orders", PartitionCount: proto.Uint32(3), LockDuration: durationpb.New(lockDuration),
		RequiresDuplicateDetection: proto.Bool(true), DuplicateDetectionHistoryTimeWindow: durationpb.New(5 * time.Minute),
	})
	msg := make([]raftbusv1.MessagingServiceClient, 3)
	for i := range msg {
		msg[i] = raftbusv1.NewMessagingServiceClient(c.Conn(i))
	}
	send := func(via int, m *raftbusv1.Message) *raftbusv1.SendResult {
		t.Helper()
		var res *raftbusv1.SendResult
		call(t, 30*time.Second, func(ctx context.Context) error {
			resp, err := msg[via].Send(ctx, &raftbusv1.SendRequest{EntityPath: "orders", Messages: []*raftbusv1.Message{m}})
			if err != nil {
				return err
			}
			res = resp.GetResults()[0]
			return nil
		})
		return res
	}
	start := time.Now()
	send(0, &raftbusv1.Message{MessageId: "before", Body: []byte("x")})
	send(0, &raftbusv1.Message{MessageId: "ttl", Body: []byte("lives 3 minutes"), TimeToLive: durationpb.New(3 * time.Minute)})

	c.Kill(2)
	c.Nodes[2].Env = []string{clock.FaultOffsetEnv + "=11m"}
	c.Restart(2)
	c.WaitReady(2, 30*time.Second)
	msg[2] = raftbusv1.NewMessagingServiceClient(c.Conn(2))
	call(t, 30*time.Second, func(ctx context.Context) error {
		states, _, err := clockView(ctx, raftbusv1.NewAdminServiceClient(c.Conn(2)))
		if err == nil && states["n3"] != raftbusv1.ClockState_CLOCK_STATE_SKEWED {
			err = status.Errorf(codes.Unavailable, "n3 says its clock is %v", states["n3"])
		}
		return err
	})

	// Traffic through every node while watching who leads: n3 may win an
	// election when a heartbeat is late, but must hand over at once (it
	// cannot stamp a command meanwhile).
	watch := make(chan time.Duration)
	stopWatch := make(chan struct{})
	go func() {
		var since time.Time
		var longest time.Duration
		for {
			select {
			case <-stopWatch:
				watch <- longest
				return
			case <-time.After(250 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, leaders, err := clockView(ctx, admin)
			cancel()
			switch {
			case err != nil:
			case leaders["n3"]:
				if since.IsZero() {
					since = time.Now()
				}
				longest = max(longest, time.Since(since))
			default:
				since = time.Time{}
			}
		}
	}()
	for i := range 60 {
		send(i%3, &raftbusv1.Message{MessageId: fmt.Sprintf("m%d", i), Body: []byte("x")})
	}
	close(stopWatch)
	if longest := <-watch; longest > 3*time.Second {
		t.Fatalf("n3 led a group for %v at a stretch with its clock 11m fast", longest)
	}
	if dup := send(2, &raftbusv1.Message{MessageId: "before", Body: []byte("x")}); !dup.GetDuplicate() {
		t.Fatalf("a resend within the duplicate detection window was enqueued again (%v): the window was cut short", dup)
	}

	received := time.Now()
	got := make(map[string]*raftbusv1.ReceivedMessage)
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < 62 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := msg[2].Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: 100, MaxWait: durationpb.New(time.Second)})
		cancel()
		if err != nil {
			if !retryable(err) {
				t.Fatalf("receive: %v", err)
			}
			continue
		}
		for _, m := range resp.GetMessages() {
			got[m.GetMessage().GetMessageId()] = m
		}
	}
	if len(got) != 62 || got["ttl"] == nil {
		t.Fatalf("received %d of 62 messages (the TTL one: %v): expired early or lost", len(got), got["ttl"] != nil)
	}
	bound := cluster.DefaultMaxClockOffset + time.Second // and the test's own latency
	now := time.Now()
	byPartition := make(map[uint32][]*raftbusv1.ReceivedMessage)
	for id, m := range got {
		if enq := m.GetEnqueuedTime().AsTime(); enq.Before(start.Add(-bound)) || enq.After(now.Add(bound)) {
			t.Errorf("%s enqueued at %v, outside [%v, %v]: the skewed clock reached the log", id, enq, start, now)
		}
		if until := m.GetLockedUntil().AsTime(); until.Before(received.Add(lockDuration-bound)) || until.After(now.Add(lockDuration+bound)) {
			t.Errorf("%s locked until %v, want about %v after %v", id, until, lockDuration, now)
		}
		byPartition[m.GetPartitionId()] = append(byPartition[m.GetPartitionId()], m)
	}
	for p, msgs := range byPartition {
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].GetSequenceNumber() < msgs[j].GetSequenceNumber() })
		for i := 1; i < len(msgs); i++ {
			if a, b := msgs[i-1].GetEnqueuedTime().AsTime(), msgs[i].GetEnqueuedTime().AsTime(); b.Before(a) {
				t.Errorf("partition %d: enqueue time went back from %v to %v", p, a, b)
			}
		}
	}

	// Healed: restarted without the offset, n3 is healthy again.
	c.Kill(2)
	c.Nodes[2].Env = nil
	c.Restart(2)
	c.WaitReady(2, 30*time.Second)
	call(t, 30*time.Second, func(ctx context.Context) error {
		states, _, err := clockView(ctx, admin)
		if err == nil && states["n3"] != raftbusv1.ClockState_CLOCK_STATE_HEALTHY {
			err = status.Errorf(codes.Unavailable, "n3's clock is %v", states["n3"])
		}
		return err
	})
}
