package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/service"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestSettleGivesEachSettlementItsOwnOutcome settles, in one request sent
// to a node that leads none of them, messages of several partitions with
// every disposition, next to settlements that must fail on their own, and
// checks each outcome and what the queue holds afterwards.
func TestSettleGivesEachSettlementItsOwnOutcome(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "jobs", PartitionCount: proto.Uint32(4), MaxDeliveryCount: proto.Int32(10)})
	for i := 0; i < 8; i++ {
		sendOne(t, c.client(0), "jobs", fmt.Sprintf("m%d", i))
	}
	var locked []*raftbusv1.ReceivedMessage
	for len(locked) < 8 {
		resp := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.ReceiveResponse, error) {
			return c.client(1).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "jobs", MaxMessages: 8, MaxWait: durationpb.New(time.Second)})
		})
		locked = append(locked, resp.GetMessages()...)
	}
	lockOf := func(m *raftbusv1.ReceivedMessage) *raftbusv1.MessageLock {
		return &raftbusv1.MessageLock{EntityPath: "jobs", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}
	}
	partitions := map[uint32]bool{}
	for _, m := range locked {
		partitions[m.GetPartitionId()] = true
	}
	if len(partitions) < 2 {
		t.Fatalf("the messages are all in one partition: %v", partitions)
	}

	reason := "poison"
	settlements := []*raftbusv1.Settlement{
		{Lock: lockOf(locked[0]), Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE, SettlementId: []byte("s0")},
		{Lock: lockOf(locked[1]), Disposition: raftbusv1.Disposition_DISPOSITION_DEAD_LETTER, DeadLetterReason: reason},
		{Lock: lockOf(locked[2]), Disposition: raftbusv1.Disposition_DISPOSITION_DEFER},
		{Lock: lockOf(locked[3]), Disposition: raftbusv1.Disposition_DISPOSITION_ABANDON},
		{Lock: lockOf(locked[4]), Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE},
		// An unknown lock token: lock lost.
		{Lock: &raftbusv1.MessageLock{EntityPath: "jobs", PartitionId: locked[5].GetPartitionId(), LockToken: make([]byte, 16)}, Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE},
		// The same lock twice with the same settlement id: the second
		// repeats the first and succeeds without effect.
		{Lock: lockOf(locked[0]), Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE, SettlementId: []byte("s0")},
		// Malformed ones.
		{Lock: lockOf(locked[5]), Disposition: raftbusv1.Disposition_DISPOSITION_UNSPECIFIED},
		{Lock: lockOf(locked[6]), Disposition: raftbusv1.Disposition_DISPOSITION_DEAD_LETTER, DeadLetterReason: strings.Repeat("x", service.MaxDeadLetterText+1)},
		{Lock: &raftbusv1.MessageLock{EntityPath: "nosuchqueue", LockToken: make([]byte, 16)}, Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE},
		{Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE},
		// A second settlement of a settled message, with another id or
		// none: lock lost, as in Service Bus.
		{Lock: lockOf(locked[0]), Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE, SettlementId: []byte("s6")},
		{Lock: lockOf(locked[4]), Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE},
	}
	want := []raftbusv1.ErrorReason{
		0, 0, 0, 0, 0,
		raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST,
		0,
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
		raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND,
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
		raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST,
		raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST,
	}
	// Through the node that leads the fewest of the partitions, so that
	// most settlements are forwarded.
	counts, via := c.leaderCounts("jobs", 4), 0
	for i := range c.nodes {
		if counts[i] < counts[via] {
			via = i
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.client(via).msg.Settle(ctx, &raftbusv1.SettleRequest{Settlements: settlements})
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	if len(resp.GetResults()) != len(settlements) {
		t.Fatalf("%d results for %d settlements", len(resp.GetResults()), len(settlements))
	}
	for i, r := range resp.GetResults() {
		if got := r.GetError().GetReason(); got != want[i] || (want[i] != 0) != (r.GetError() != nil) {
			t.Errorf("settlement %d: got %v (%s), want %v", i, r.GetError().GetReason(), r.GetError().GetMessage(), want[i])
		}
	}

	// What is left: the abandoned message (available again), the ones
	// not settled (5 to 7, still locked), the deferred one and the
	// dead-lettered one with its reason.
	peek, err := c.client(0).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "jobs", MaxMessages: 100})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, m := range peek.GetMessages() {
		left[m.GetMessage().GetMessageId()] = true
	}
	for i, m := range locked {
		id := m.GetMessage().GetMessageId()
		if gone := i == 0 || i == 1 || i == 4; left[id] == gone {
			t.Errorf("message %d (%s): in the queue %v, want %v", i, id, left[id], !gone)
		}
	}
	dlq, err := c.client(0).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "jobs", SubQueue: raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, MaxMessages: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq.GetMessages()) != 1 || dlq.GetMessages()[0].GetMessage().GetMessageId() != locked[1].GetMessage().GetMessageId() || dlq.GetMessages()[0].GetDeadLetterReason() != reason {
		t.Fatalf("dead-letter queue holds %v, want %s with reason %q", dlq.GetMessages(), locked[1].GetMessage().GetMessageId(), reason)
	}

	// A request with nothing or too much in it is refused as a whole.
	for _, n := range []int{0, service.MaxBatch + 1} {
		_, err := c.client(0).msg.Settle(ctx, &raftbusv1.SettleRequest{Settlements: make([]*raftbusv1.Settlement, n)})
		if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("settle of %d: %v, want INVALID_ARGUMENT", n, err)
		}
	}
}
