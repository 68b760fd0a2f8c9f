package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// retryable reports whether err says the call may succeed if repeated.
func retryable(err error) bool {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info.Retryable
		}
	}
	// No answer at all: the node is down or the call timed out.
	return st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded
}

// TestKillPartitionLeaderLosesNoAcknowledgedMessage sends to a partitioned
// queue of three raftbusd processes, SIGKILLs the node leading partition 0
// and keeps going through the others: every acknowledged message must be
// received, and the partition must be served again within seconds.
func TestKillPartitionLeaderLosesNoAcknowledgedMessage(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	clients := make([]raftbusv1.MessagingServiceClient, 3)
	for i := range clients {
		clients[i] = raftbusv1.NewMessagingServiceClient(c.Conn(i))
	}
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{
		Name: "orders", PartitionCount: proto.Uint32(3), RequiresDuplicateDetection: proto.Bool(true),
	})

	acked := make(map[string]bool)
	send := func(via []int, id string, partition *uint32) {
		t.Helper()
		k := 0
		call(t, 30*time.Second, func(ctx context.Context) error {
			cl := clients[via[k%len(via)]]
			k++
			// The same MessageId on every attempt: duplicate detection
			// makes a resend after an unknown outcome safe.
			_, err := cl.Send(ctx, &raftbusv1.SendRequest{EntityPath: "orders", PartitionId: partition,
				Messages: []*raftbusv1.Message{{MessageId: id, Body: []byte(id)}}})
			return err
		})
		acked[id] = true
	}
	for i := 0; i < 60; i++ {
		send([]int{i % 3}, fmt.Sprintf("before-%d", i), nil)
	}

	table, err := admin.GetRoutingTable(context.Background(), &raftbusv1.GetRoutingTableRequest{EntityPath: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	victim := c.IndexOf(table.GetEntities()[0].GetPartitions()[0].GetLeaderAddress())
	if victim < 0 {
		t.Fatalf("no leader for partition 0 in %v", table)
	}
	var alive []int
	for i := range c.Nodes {
		if i != victim {
			alive = append(alive, i)
		}
	}
	c.Kill(victim)
	killed := time.Now()
	zero := uint32(0)
	send(alive, "first-after-kill", &zero)
	t.Logf("partition 0 served again %v after its leader was killed", time.Since(killed).Round(time.Millisecond))
	if d := time.Since(killed); d > 15*time.Second {
		t.Errorf("partition 0 took %v to serve again after its leader died", d)
	}
	for i := 0; i < 60; i++ {
		send(alive, fmt.Sprintf("after-%d", i), nil)
	}

	// Drain through a survivor: every acknowledged message must be there.
	got := make(map[string]bool)
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(acked) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := clients[alive[0]].Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: 100, MaxWait: durationpb.New(time.Second)})
		cancel()
		if err != nil {
			if !retryable(err) {
				t.Fatalf("receive: %v", err)
			}
			continue
		}
		for _, m := range resp.GetMessages() {
			got[m.GetMessage().GetMessageId()] = true
			lock := &raftbusv1.MessageLock{EntityPath: "orders", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}
			call(t, 30*time.Second, func(ctx context.Context) error {
				_, err := clients[alive[0]].Complete(ctx, &raftbusv1.CompleteRequest{Lock: lock})
				return err
			})
		}
	}
	for id := range acked {
		if !got[id] {
			t.Errorf("acknowledged message %s was lost", id)
		}
	}

	// The killed node comes back and serves again.
	c.Restart(victim)
	c.WaitReady(victim, 30*time.Second)
	send([]int{victim}, "via-restarted", nil)
}

// createQueue creates q through admin, repeating while the answer is
// retryable, up to timeout; a queue that already exists (a repeat whose
// first attempt took effect) is fine.
func createQueue(t *testing.T, admin raftbusv1.AdminServiceClient, timeout time.Duration, q *raftbusv1.QueueProperties) {
	t.Helper()
	call(t, timeout, func(ctx context.Context) error {
		_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: q})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	})
}

// call repeats op while it fails with a retryable error, up to timeout.
func call(t *testing.T, timeout time.Duration, op func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := op(ctx)
		cancel()
		if err == nil {
			return
		}
		if !retryable(err) {
			t.Fatalf("non-retryable error: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(min(20*time.Millisecond<<min(attempt, 5), 500*time.Millisecond))
	}
}
