package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/service"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestAnswersOfLargeMessagesFitTheirGRPCMessage peeks, receives and
// receives deferred large messages of a partitioned queue, through a node
// that forwards to one of the partitions' leaders, with a client that
// keeps gRPC's default limit of 4 MiB on what it receives. Every answer
// must fit (a peek or receive in 4 MiB; a deferred receive across
// partitions in 4 MiB per partition), and between them they must hand out
// every message once.
func TestAnswersOfLargeMessagesFitTheirGRPCMessage(t *testing.T) {
	const size, count = 1_000_000, 10
	c := newTestCluster(t, 3)
	// Duplicate detection makes a send repeated after an unknown outcome
	// store nothing twice.
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "big", PartitionCount: proto.Uint32(2), MaxMessageSizeInKilobytes: proto.Int64(1024),
		RequiresDuplicateDetection: proto.Bool(true)})
	via := (c.leaderOf("big", 0) + 1) % 3
	cl := c.client(via)
	for i := range count {
		retry(t, 30*time.Second, func(ctx context.Context) (*raftbusv1.SendResponse, error) {
			return cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "big", Messages: []*raftbusv1.Message{{MessageId: fmt.Sprint(i), Body: make([]byte, size)}}})
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var peeked []int64
	for from := int64(0); ; {
		resp, err := cl.msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "big", FromSequenceNumber: from, MaxMessages: 1000})
		if err != nil {
			t.Fatalf("peek from %d after %d messages: %v", from, len(peeked), err)
		}
		if len(resp.GetMessages()) == 0 {
			break
		}
		for _, m := range resp.GetMessages() {
			peeked = append(peeked, m.GetSequenceNumber())
		}
		from = peeked[len(peeked)-1] + 1
	}
	if len(peeked) != count || !slices.IsSorted(peeked) {
		t.Fatalf("peeked %d messages %x, want each of %d once in order", len(peeked), peeked, count)
	}

	var deferred []int64
	for len(deferred) < count {
		resp, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "big", MaxMessages: 1000, MaxWait: durationpb.New(5 * time.Second)})
		if err != nil || len(resp.GetMessages()) == 0 {
			t.Fatalf("receive after %d of %d messages: %d, %v", len(deferred), count, len(resp.GetMessages()), err)
		}
		for _, m := range resp.GetMessages() {
			lock := &raftbusv1.MessageLock{EntityPath: "big", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}
			if _, err := cl.msg.Defer(ctx, &raftbusv1.DeferRequest{Lock: lock}); err != nil {
				t.Fatalf("defer: %v", err)
			}
			deferred = append(deferred, m.GetSequenceNumber())
		}
	}

	// Up to 4 MiB per partition: more than the client's default.
	perPartition := grpc.MaxCallRecvMsgSize(2 * service.MaxReceiveBytes)
	received := map[int64]bool{}
	for pending := deferred; len(pending) > 0; {
		resp, err := cl.msg.ReceiveDeferred(ctx, &raftbusv1.ReceiveDeferredRequest{EntityPath: "big", SequenceNumbers: pending,
			ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE}, perPartition)
		if err != nil || len(resp.GetMessages()) == 0 {
			t.Fatalf("receive deferred after %d of %d messages: %d, %v", len(received), count, len(resp.GetMessages()), err)
		}
		for _, m := range resp.GetMessages() {
			received[m.GetSequenceNumber()] = true
		}
		pending = slices.DeleteFunc(slices.Clone(pending), func(seq int64) bool { return received[seq] })
	}
	rt, err := cl.admin.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: "big"})
	if err != nil || rt.GetProperties().GetTotalMessageCount() != 0 {
		t.Fatalf("queue after receiving every deferred message: %v, %v", rt, err)
	}
}
