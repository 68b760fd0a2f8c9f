package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

// TestSecondCompleteOfASettledMessageFindsTheLockLost settles each of
// four messages through the SDK against raftbusd processes, then settles
// it again with a separate call: as in Service Bus, the second call fails
// with CodeLockLost (not retryable) and changes nothing, whatever the two
// dispositions.
func TestSecondCompleteOfASettledMessageFindsTheLockLost(t *testing.T) {
	c := procs.Start(t, raftbusd, 1)
	const queue = "settle-twice"
	cl, adm := clientWithQueue(t, c, queue, nil)
	sender, err := cl.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	retry(t, 30*time.Second, func(ctx context.Context) error {
		var batch []*client.Message
		for i := range 4 {
			batch = append(batch, &client.Message{MessageID: fmt.Sprintf("m%d", i), Body: []byte("x")})
		}
		return sender.SendMessages(ctx, batch)
	})
	r, err := cl.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*client.ReceivedMessage
	retry(t, 30*time.Second, func(ctx context.Context) error {
		more, err := r.ReceiveMessages(ctx, 4-len(got), &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
		got = append(got, more...)
		if err == nil && len(got) < 4 {
			err = fmt.Errorf("received %d of 4", len(got))
		}
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type settle func(*client.ReceivedMessage) error
	complete := func(m *client.ReceivedMessage) error { return r.CompleteMessage(ctx, m, nil) }
	abandon := func(m *client.ReceivedMessage) error { return r.AbandonMessage(ctx, m, nil) }
	deadLetter := func(m *client.ReceivedMessage) error { return r.DeadLetterMessage(ctx, m, nil) }
	deferIt := func(m *client.ReceivedMessage) error { return r.DeferMessage(ctx, m, nil) }
	cases := []struct {
		name          string
		first, second settle
	}{
		{"complete twice", complete, complete},
		{"abandon, then complete", abandon, complete},
		{"dead-letter twice", deadLetter, deadLetter},
		{"defer, then abandon", deferIt, abandon},
	}
	for i, tc := range cases {
		if err := tc.first(got[i]); err != nil {
			t.Fatalf("%s: the first settlement: %v", tc.name, err)
		}
		err := tc.second(got[i])
		var ce *client.Error
		if !errors.Is(err, client.ErrLockLost) || !errors.As(err, &ce) || ce.Retryable {
			t.Fatalf("%s: the second settlement: %v, want CodeLockLost, not retryable", tc.name, err)
		}
	}
	rt, err := adm.GetQueueRuntimeProperties(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	// m0 completed, m1 available again, m2 dead-lettered, m3 deferred.
	if rt.GetActiveMessageCount() != 1 || rt.GetDeadLetterMessageCount() != 1 || rt.GetDeferredMessageCount() != 1 || rt.GetTotalMessageCount() != 3 {
		t.Fatalf("after the second settlements: %v", rt)
	}
}

// TestForwardedDeadLetterKeepsItsReason dead-letters messages of a
// partitioned queue through the SDK, by the receiver's call and by
// MaxDeliveryCount, against a cluster of raftbusd processes; its
// ForwardDeadLetteredMessagesTo moves them to another partitioned queue,
// whose partitions are other Raft groups. Received there, each says the
// DeadLetterReason and DeadLetterErrorDescription it was dead-lettered
// with, as in Service Bus.
func TestForwardedDeadLetterKeepsItsReason(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	cl, _ := clientWithQueue(t, c, "errors", &admin.QueueProperties{PartitionCount: proto.Uint32(4)})
	// Duplicate detection makes the sends safe to repeat.
	clientWithQueue(t, c, "work", &admin.QueueProperties{PartitionCount: proto.Uint32(4), MaxDeliveryCount: proto.Int32(1),
		ForwardDeadLetteredMessagesTo: "errors", RequiresDuplicateDetection: proto.Bool(true)})
	sender, err := cl.NewSender("work", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	retry(t, 30*time.Second, func(ctx context.Context) error {
		var batch []*client.Message
		for i := range n {
			batch = append(batch, &client.Message{MessageID: fmt.Sprintf("w%d", i), Body: []byte("x"),
				ApplicationProperties: map[string]any{"n": int64(i)}})
		}
		return sender.SendMessages(ctx, batch)
	})
	work, err := cl.NewReceiverForQueue("work", nil)
	if err != nil {
		t.Fatal(err)
	}
	type reason struct{ reason, description string }
	want := map[string]reason{}
	retry(t, 60*time.Second, func(ctx context.Context) error {
		got, err := work.ReceiveMessages(ctx, n, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
		for _, m := range got {
			if len(want)%3 == 2 {
				// Its only delivery ends: MaxDeliveryCount dead-letters it.
				if err := work.AbandonMessage(ctx, m, nil); err != nil {
					return err
				}
				want[m.MessageID] = reason{"MaxDeliveryCountExceeded", "Message could not be consumed after the maximum number of delivery attempts."}
				continue
			}
			r, d := "reason of "+m.MessageID, "description of "+m.MessageID
			if err := work.DeadLetterMessage(ctx, m, &client.DeadLetterOptions{Reason: &r, ErrorDescription: &d}); err != nil {
				return err
			}
			want[m.MessageID] = reason{r, d}
		}
		if err == nil && len(want) < n {
			err = fmt.Errorf("dead-lettered %d of %d", len(want), n)
		}
		return err
	})
	errs, err := cl.NewReceiverForQueue("errors", nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	partitions := map[uint32]bool{}
	retry(t, 60*time.Second, func(ctx context.Context) error {
		got, err := errs.ReceiveMessages(ctx, n, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
		for _, m := range got {
			w, ok := want[m.MessageID]
			if !ok {
				t.Fatalf("the target received %q, which was not dead-lettered", m.MessageID)
			}
			if m.DeadLetterReason != w.reason || m.DeadLetterErrorDescription != w.description {
				t.Fatalf("%s in the target says %q (%q), want %q (%q)", m.MessageID, m.DeadLetterReason, m.DeadLetterErrorDescription, w.reason, w.description)
			}
			if m.ApplicationProperties["n"] == nil {
				t.Fatalf("%s lost its own properties: %v", m.MessageID, m.ApplicationProperties)
			}
			seen[m.MessageID] = true
			partitions[m.PartitionID] = true
			if err := errs.CompleteMessage(ctx, m, nil); err != nil {
				return err
			}
		}
		if err == nil && len(seen) < n {
			err = fmt.Errorf("the target received %d of %d", len(seen), n)
		}
		return err
	})
	if len(partitions) < 2 {
		t.Fatalf("the dead letters arrived in %d partition(s) of the target; the test wants them spread", len(partitions))
	}
}
