package service

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Every call about an entity the node's metadata does not have answers
// NOT_FOUND, with its ErrorInfo, whichever service serves it.
func TestAnUnknownEntityIsNotFoundWithErrorInfo(t *testing.T) {
	admin, msg := serve(t, newFakeNode("orders", 2))
	ctx := context.Background()
	lock := &raftbusv1.MessageLock{EntityPath: "nope", LockToken: make([]byte, 16)}
	for name, call := range map[string]func() error{
		"send": func() error {
			_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "nope", Messages: []*raftbusv1.Message{{}}})
			return err
		},
		"receive":  func() error { _, err := msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "nope"}); return err },
		"peek":     func() error { _, err := msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "nope"}); return err },
		"complete": func() error { _, err := msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: lock}); return err },
		"subscription": func() error {
			_, err := msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders/subscriptions/audit"})
			return err
		},
		"runtime": func() error {
			_, err := admin.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: "nope"})
			return err
		},
	} {
		err := call()
		st := status.Convert(err)
		if st.Code() != codes.NotFound || !apierror.HasInfo(st) || apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
			t.Errorf("%s of an unknown entity: %v (details %v); want NOT_FOUND with its ErrorInfo", name, err, st.Details())
		}
	}
}

// A send whose partition another node leads goes there, named by its
// partition, and the leader's answer is the caller's; nothing is applied
// here.
func TestASendToAPartitionLedElsewhereIsForwarded(t *testing.T) {
	node := newFakeNode("orders", 4)
	node.lead(0, 1)
	const leader = "10.0.0.3:7400"
	node.leaders[2] = leader
	node.answer = func(addr, method string, req, reply any) error {
		proto.Merge(reply.(proto.Message), &raftbusv1.SendResponse{Results: []*raftbusv1.SendResult{{SequenceNumber: 7, PartitionId: 2}}})
		return nil
	}
	_, msg := serve(t, node)
	var key string
	for i := 0; raftbusv1.PartitionForKey(key, 4) != 2; i++ {
		key = string(rune('a' + i))
	}
	sent := &raftbusv1.Message{MessageId: "m", PartitionKey: key, Body: []byte("x")}
	resp, err := msg.Send(context.Background(), &raftbusv1.SendRequest{EntityPath: "orders", Messages: []*raftbusv1.Message{sent}})
	if err != nil || len(resp.GetResults()) != 1 || resp.GetResults()[0].GetSequenceNumber() != 7 {
		t.Fatalf("send: %v, %v; want the leader's answer", resp, err)
	}
	calls := node.calls()
	if len(calls) != 1 || calls[0].addr != leader || calls[0].method != raftbusv1.MessagingService_Send_FullMethodName {
		t.Fatalf("forwarded %v; want one Send to %s", calls, leader)
	}
	fwd := calls[0].req.(*raftbusv1.SendRequest)
	if fwd.PartitionId == nil || fwd.GetPartitionId() != 2 || !proto.Equal(fwd.GetMessages()[0], sent) {
		t.Fatalf("forwarded %v; want the message, for partition 2", fwd)
	}
	for id, r := range node.replicas {
		if n := len(r.commands()); n != 0 {
			t.Errorf("partition %d, led here, applied %d commands", id, n)
		}
	}
}

// A send to a partition this node leads is one Send command on its
// replica.
func TestASendToAPartitionLedHereIsAppliedHere(t *testing.T) {
	node := newFakeNode("orders", 2)
	node.lead(1)
	node.replicas[1].result = func(cmd *enginev1.Command) (*enginev1.Result, error) {
		return &enginev1.Result{Result: &enginev1.Result_Send{Send: &enginev1.SendResult{Messages: []*raftbusv1.SendResult{{SequenceNumber: 1<<48 | 1, PartitionId: 1}}}}}, nil
	}
	_, msg := serve(t, node)
	one := uint32(1)
	resp, err := msg.Send(context.Background(), &raftbusv1.SendRequest{EntityPath: "orders", PartitionId: &one, Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
	if err != nil || resp.GetResults()[0].GetSequenceNumber() != 1<<48|1 {
		t.Fatalf("send: %v, %v", resp, err)
	}
	cmds := node.replicas[1].commands()
	if len(cmds) != 1 || cmds[0].GetSend().GetEntityPath() != "orders" || len(cmds[0].GetSend().GetMessages()) != 1 {
		t.Fatalf("partition 1 applied %v; want one Send to orders", cmds)
	}
	if calls := node.calls(); len(calls) != 0 {
		t.Fatalf("forwarded %v", calls)
	}
}

// A Settle of locks in a partition led here and in one led elsewhere
// settles each where it is, and every settlement keeps its own outcome, in
// the order asked.
func TestSettleGivesEachSettlementItsOwnOutcomeHereAndAtTheLeader(t *testing.T) {
	node := newFakeNode("orders", 2)
	node.lead(0)
	node.leaders[1] = "10.0.0.2:7400"
	lost := &engine.Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST, Message: "the lock expired"}
	node.replicas[0].result = func(cmd *enginev1.Command) (*enginev1.Result, error) {
		if cmd.GetSettle().GetLockToken()[0] == 2 {
			return nil, lost
		}
		return &enginev1.Result{}, nil
	}
	node.answer = func(addr, method string, req, reply any) error {
		proto.Merge(reply.(proto.Message), &raftbusv1.SettleResponse{Results: []*raftbusv1.SettleResult{{}}})
		return nil
	}
	_, msg := serve(t, node)
	settlement := func(partition uint32, token byte) *raftbusv1.Settlement {
		lt := make([]byte, 16)
		lt[0] = token
		return &raftbusv1.Settlement{Lock: &raftbusv1.MessageLock{EntityPath: "orders", PartitionId: partition, LockToken: lt},
			Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE}
	}
	here, gone, there := settlement(0, 1), settlement(0, 2), settlement(1, 3)
	resp, err := msg.Settle(context.Background(), &raftbusv1.SettleRequest{Settlements: []*raftbusv1.Settlement{here, there, gone}})
	if err != nil || len(resp.GetResults()) != 3 {
		t.Fatalf("settle: %v, %v", resp, err)
	}
	if r := resp.GetResults(); r[0].GetError() != nil || r[1].GetError() != nil || r[2].GetError().GetReason() != raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST {
		t.Fatalf("results %v; want complete, complete, lock lost", r)
	}
	if n := len(node.replicas[0].commands()); n != 2 {
		t.Fatalf("partition 0 applied %d settlements, want 2", n)
	}
	calls := node.calls()
	if len(calls) != 1 || len(calls[0].req.(*raftbusv1.SettleRequest).GetSettlements()) != 1 {
		t.Fatalf("forwarded %v; want partition 1's settlement alone", calls)
	}
}
