package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

// TestSingleNode runs the SDK against one raftbusd process.
func TestSingleNode(t *testing.T) {
	e := startEnv(t, 1)
	t.Run("SendReceiveComplete", e.testSendReceiveComplete)
	t.Run("ConcurrentFirstSendsShareOneRouteLookup", e.testConcurrentFirstSendsShareOneRouteLookup)
	t.Run("LockLostAfterExpiry", e.testLockLostAfterExpiry)
	t.Run("WrongLockToken", e.testWrongLockToken)
	t.Run("NotFound", e.testNotFound)
	t.Run("MessageTooLarge", e.testMessageTooLarge)
	t.Run("Quota", e.testQuota)
	t.Run("BatchPeekAndReceiveAndDelete", e.testBatchPeekAndReceiveAndDelete)
	t.Run("ScheduleAndCancel", e.testScheduleAndCancel)
	t.Run("DeferAndDeadLetter", e.testDeferAndDeadLetter)
	t.Run("DeadLetterKeepsTheSequenceNumber", e.testDeadLetterKeepsTheSequenceNumber)
	t.Run("PipelinedSends", e.testPipelinedSends)
	t.Run("ConcurrentCallsKeepTheirOwnOutcomes", e.testConcurrentCallsKeepTheirOwnOutcomes)
	t.Run("PartitionedSequenceNumbers", e.testPartitionedSequenceNumbers)
	t.Run("Processor", e.testProcessor)
	t.Run("ProcessorCloseWaitsForHandlers", e.testProcessorCloseWaitsForHandlers)
	t.Run("TopicsAndRules", e.testTopicsAndRules)
	t.Run("Sessions", e.testSessions)
	t.Run("SessionBatchOutlivesTheMessageLockDuration", e.testSessionBatchOutlivesTheMessageLockDuration)
	t.Run("SendResult", e.testSendResult)
	t.Run("KeylessSendsGoAnywhereAndDuplicatesMeet", e.testKeylessSendsGoAnywhereAndDuplicatesMeet)
	t.Run("Admin", e.testAdmin)
	t.Run("SessionProcessor", e.testSessionProcessor)
	t.Run("LargeMessagesComeInAnswersThatFit", e.testLargeMessagesComeInAnswersThatFit)
	t.Run("LargeDeferredMessagesAreAllReceived", e.testLargeDeferredMessagesAreAllReceived)
	t.Run("PropertyTypes", e.testPropertyTypes)
}

func (e *env) testSendReceiveComplete(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("orders", &admin.QueueProperties{PartitionCount: proto.Uint32(2)})
	s := e.sender("orders")
	want := map[string]bool{}
	for i := range 6 {
		id := fmt.Sprintf("m%d", i)
		want[id] = true
		err := s.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte("body " + id), Subject: "s",
			ApplicationProperties: map[string]any{"n": i, "ok": true}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	r := e.receiver("orders", nil)
	got := receiveN(t, ctx, r, 6)
	for _, m := range got {
		if !want[m.MessageID] || string(m.Body) != "body "+m.MessageID || m.ApplicationProperties["ok"] != true {
			t.Fatalf("unexpected message %+v", m)
		}
		if m.LockedUntil.Before(time.Now()) || m.DeliveryCount != 1 {
			t.Fatalf("message %s: locked until %v, delivery count %d", m.MessageID, m.LockedUntil, m.DeliveryCount)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		delete(want, m.MessageID)
	}
	// A second, separate settlement finds the lock gone, as in Service
	// Bus, whether it completes again or settles another way (a retry of
	// one call, with its settlement id, is client/lostanswer_test.go's).
	if err := r.CompleteMessage(ctx, got[0], nil); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("second complete: %v, want lock lost", err)
	}
	if err := r.AbandonMessage(ctx, got[0], nil); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("abandon after complete: %v, want lock lost", err)
	}
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "orders")
	if err != nil || rt.GetActiveMessageCount() != 0 {
		t.Fatalf("runtime %v, %v", rt, err)
	}
}
