package client_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

// maxAnswerBytes is what the server hands out for one receive or peek.
const maxAnswerBytes = 4 << 20

// testLargeMessagesComeInAnswersThatFit fills a queue with more messages
// of about 1 MiB than one gRPC message can carry (110 MiB), peeks and
// receives them all at once, in ReceiveAndDelete mode: every answer must
// be deliverable, so each holds what fits in 4 MiB, and none of the
// messages the broker removed may be lost on the way. Under the race
// detector, which slows the SDK's encoding some twentyfold, the queue
// holds less than 110 MiB, still several answers' worth.
func (e *env) testLargeMessagesComeInAnswersThatFit(t *testing.T) {
	const size = 1_000_000
	count := 120
	if raceEnabled {
		count = 16
	}
	ctx := ctxT(t, 5*time.Minute)
	e.createQueue("large", &admin.QueueProperties{MaxMessageSizeInKilobytes: proto.Int64(1024), MaxSizeInMegabytes: proto.Int64(1024)})
	var msgs []*client.Message
	for i := range count {
		msgs = append(msgs, &client.Message{MessageID: fmt.Sprint(i), Body: make([]byte, size)})
	}
	start := time.Now()
	if err := e.sender("large").SendMessages(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages of %d bytes sent in %v", count, size, time.Since(start))

	r := e.receiver("large", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	peeked, err := r.PeekMessages(ctx, 1000, nil)
	if err != nil || len(peeked) == 0 || len(peeked)*size > maxAnswerBytes {
		t.Fatalf("peek of 1000: %d messages, %v; want what fits in %d bytes", len(peeked), err, maxAnswerBytes)
	}
	got := map[string]bool{}
	answers := 0
	for len(got) < count {
		batch, err := r.ReceiveMessages(ctx, 1000, &client.ReceiveMessagesOptions{MaxWaitTime: 10 * time.Second})
		if err != nil {
			t.Fatalf("receive after %d of %d messages: %v", len(got), count, err)
		}
		if len(batch) == 0 {
			t.Fatalf("%d of %d messages received; the others are lost", len(got), count)
		}
		if len(batch)*size > maxAnswerBytes {
			t.Fatalf("an answer of %d messages of %d bytes, over %d", len(batch), size, maxAnswerBytes)
		}
		for _, m := range batch {
			if got[m.MessageID] || len(m.Body) != size {
				t.Fatalf("message %s received twice, or with %d bytes", m.MessageID, len(m.Body))
			}
			got[m.MessageID] = true
		}
		answers++
	}
	t.Logf("%d messages received in %d answers", count, answers)
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "large")
	if err != nil || rt.GetTotalMessageCount() != 0 {
		t.Fatalf("queue after receiving everything: %v, %v", rt, err)
	}
}

// testLargeDeferredMessagesAreAllReceived defers more messages than one
// answer holds: ReceiveDeferredMessages asks again until it has them all.
func (e *env) testLargeDeferredMessagesAreAllReceived(t *testing.T) {
	const size, count = 1_000_000, 10
	ctx := ctxT(t, 2*time.Minute)
	e.createQueue("largedeferred", &admin.QueueProperties{MaxMessageSizeInKilobytes: proto.Int64(1024)})
	var msgs []*client.Message
	for i := range count {
		msgs = append(msgs, &client.Message{MessageID: fmt.Sprint(i), Body: make([]byte, size)})
	}
	if err := e.sender("largedeferred").SendMessages(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("largedeferred", nil)
	var seqs []int64
	for _, m := range receiveN(t, ctx, r, count) {
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.SequenceNumber)
	}
	got, err := r.ReceiveDeferredMessages(ctx, seqs, nil)
	if err != nil || len(got) != count {
		t.Fatalf("receive %d deferred messages of %d bytes: got %d, %v", count, size, len(got), err)
	}
	for _, m := range got {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}
