package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

// testSessionBatchOutlivesTheMessageLockDuration receives a batch of a
// session's messages and processes them slowly, for longer than the
// queue's lock duration, renewing the session lock: the session lock
// covers the messages received under it, so all complete, in order. Once
// the session lock is gone, settling fails with CodeSessionLockLost.
func (e *env) testSessionBatchOutlivesTheMessageLockDuration(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	lockDuration := 2 * time.Second
	e.createQueue("slow-session", &admin.QueueProperties{RequiresSession: proto.Bool(true), LockDuration: durationpb.New(lockDuration)})
	s := e.sender("slow-session")
	for i := range 7 {
		if err := s.SendMessage(ctx, &client.Message{MessageID: fmt.Sprint(i), Body: []byte(fmt.Sprint(i)), SessionID: "k"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sr, err := e.c.AcceptSessionForQueue(ctx, "slow-session", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sr.ReceiveMessages(ctx, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("received %d messages of the session, want a batch of 5", len(msgs))
	}
	for i, m := range msgs {
		if string(m.Body) != fmt.Sprint(i) || m.DeliveryCount != 1 {
			t.Fatalf("message %d of the batch: %q, delivery count %d", i, m.Body, m.DeliveryCount)
		}
	}
	// The handler takes 2.5 lock durations over the batch; the session
	// lock is renewed every half lock duration meanwhile.
	renew := time.NewTicker(lockDuration / 2)
	defer renew.Stop()
	for end := time.Now().Add(lockDuration * 5 / 2); time.Now().Before(end); {
		<-renew.C
		if err := sr.RenewSessionLock(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !time.Now().After(msgs[0].LockedUntil) {
		t.Fatal("the test did not outlast the lock the messages were received with")
	}
	for i, m := range msgs {
		if err := sr.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatalf("complete %d after %v: %v", i, time.Since(msgs[0].LockedUntil), err)
		}
	}
	// The rest, then the session lock is given up before settling.
	rest, err := sr.ReceiveMessages(ctx, 5, nil)
	if err != nil || len(rest) != 2 || string(rest[0].Body) != "5" {
		t.Fatalf("received %d more, %v", len(rest), err)
	}
	if err := sr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sr.CompleteMessage(ctx, rest[0], nil); !errors.Is(err, client.ErrSessionLockLost) {
		t.Fatalf("complete after the session was closed: %v, want session lock lost", err)
	}
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "slow-session")
	if err != nil || rt.GetActiveMessageCount() != 2 || rt.GetLockedMessageCount() != 0 {
		t.Fatalf("runtime %v, %v", rt, err)
	}
}
