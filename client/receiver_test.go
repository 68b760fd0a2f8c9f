package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

func (e *env) testLockLostAfterExpiry(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("short-lock", &admin.QueueProperties{LockDuration: durationpb.New(time.Second)})
	if err := e.sender("short-lock").SendMessage(ctx, &client.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("short-lock", nil)
	m := receiveN(t, ctx, r, 1)[0]
	// Once the lock has expired the message is handed out again; the
	// first lock is then lost for good.
	again := receiveN(t, ctx, r, 1)[0]
	if again.SequenceNumber != m.SequenceNumber || again.DeliveryCount != 2 {
		t.Fatalf("redelivery %d (count %d), want %d (count 2)", again.SequenceNumber, again.DeliveryCount, m.SequenceNumber)
	}
	err := r.CompleteMessage(ctx, m, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeLockLost || ce.Retryable {
		t.Fatalf("complete with an expired lock: %v, want a non-retryable lock lost", err)
	}
	if err := r.RenewMessageLock(ctx, again, nil); err != nil {
		t.Fatalf("renew the live lock: %v", err)
	}
	if err := r.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatal(err)
	}
}

func (e *env) testWrongLockToken(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("tokens", nil)
	if err := e.sender("tokens").SendMessage(ctx, &client.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("tokens", nil)
	m := receiveN(t, ctx, r, 1)[0]
	forged := *m
	forged.LockToken[0] ^= 0xff
	for name, settle := range map[string]func() error{
		"complete":   func() error { return r.CompleteMessage(ctx, &forged, nil) },
		"abandon":    func() error { return r.AbandonMessage(ctx, &forged, nil) },
		"deadletter": func() error { return r.DeadLetterMessage(ctx, &forged, nil) },
		"defer":      func() error { return r.DeferMessage(ctx, &forged, nil) },
		"renew":      func() error { return r.RenewMessageLock(ctx, &forged, nil) },
	} {
		if err := settle(); !errors.Is(err, client.ErrLockLost) {
			t.Fatalf("%s with a wrong token: %v, want lock lost", name, err)
		}
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("the real token still settles: %v", err)
	}
}

func (e *env) testNotFound(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	err := e.sender("no-such-queue").SendMessage(ctx, &client.Message{Body: []byte("x")}, nil)
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("send to a missing queue: %v", err)
	}
	_, err = e.receiver("no-such-queue", nil).ReceiveMessages(ctx, 1, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("receive from a missing queue: %v", err)
	}
	if _, err := e.admin.GetQueue(ctx, "no-such-queue"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get a missing queue: %v", err)
	}
	if err := e.admin.DeleteQueue(ctx, "no-such-queue"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete a missing queue: %v", err)
	}
}

func (e *env) testMessageTooLarge(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("small", &admin.QueueProperties{MaxMessageSizeInKilobytes: proto.Int64(1)})
	s := e.sender("small")
	err := s.SendMessage(ctx, &client.Message{Body: make([]byte, 4096)}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeMessageSizeExceeded || ce.Retryable {
		t.Fatalf("send of 4 KiB to a 1 KiB queue: %v", err)
	}
	if err := s.SendMessage(ctx, &client.Message{Body: make([]byte, 100)}, nil); err != nil {
		t.Fatalf("a small message still fits: %v", err)
	}

	// A batch refuses what would take it over its own limit.
	b, err := s.NewMessageBatch(ctx, &client.MessageBatchOptions{MaxBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AddMessage(&client.Message{Body: make([]byte, 200)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddMessage(&client.Message{Body: make([]byte, 200)}, nil); !errors.Is(err, client.ErrMessageTooLarge) {
		t.Fatalf("second 200-byte message in a 300-byte batch: %v", err)
	}
	if b.NumMessages() != 1 {
		t.Fatalf("batch holds %d messages", b.NumMessages())
	}
	if err := b.AddMessage(&client.Message{SessionID: "other", Body: []byte("x")}, nil); !errors.Is(err, &client.Error{Code: client.CodeInvalidArgument}) {
		t.Fatalf("a message of another partition key: %v", err)
	}
}

func (e *env) testBatchPeekAndReceiveAndDelete(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("batch", nil)
	s := e.sender("batch")
	b, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := b.AddMessage(&client.Message{MessageID: fmt.Sprint(i), Body: []byte{byte(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("batch", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	peeked, err := r.PeekMessages(ctx, 3, nil)
	if err != nil || len(peeked) != 3 || peeked[0].MessageID != "0" || peeked[2].MessageID != "2" {
		t.Fatalf("peek: %v, %v", peeked, err)
	}
	more, err := r.PeekMessages(ctx, 10, nil)
	if err != nil || len(more) != 2 || more[0].MessageID != "3" {
		t.Fatalf("peek continues after the last: %v, %v", more, err)
	}
	got := receiveN(t, ctx, r, 5)
	for i, m := range got {
		if m.MessageID != fmt.Sprint(i) {
			t.Fatalf("message %d is %s: order lost", i, m.MessageID)
		}
	}
	if err := r.CompleteMessage(ctx, got[0], nil); !errors.Is(err, &client.Error{Code: client.CodeInvalidArgument}) {
		t.Fatalf("complete of a received-and-deleted message: %v", err)
	}
	left, err := r.PeekMessages(ctx, 10, &client.PeekMessagesOptions{FromSequenceNumber: new(int64)})
	if err != nil || len(left) != 0 {
		t.Fatalf("after receive-and-delete %d messages are left (%v)", len(left), err)
	}
}

func (e *env) testScheduleAndCancel(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("scheduled", nil)
	s := e.sender("scheduled")
	seqs, err := s.ScheduleMessages(ctx, []*client.Message{{Body: []byte("later")}, {Body: []byte("cancelled")}}, time.Now().Add(time.Hour), nil)
	if err != nil || len(seqs) != 2 {
		t.Fatalf("schedule: %v, %v", seqs, err)
	}
	if err := s.CancelScheduledMessages(ctx, seqs[1:], nil); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("scheduled", nil)
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 1 || peeked[0].SequenceNumber != seqs[0] || peeked[0].State != client.MessageStateScheduled {
		t.Fatalf("peek after cancel: %+v, %v", peeked, err)
	}
	soon, err := s.ScheduleMessages(ctx, []*client.Message{{Body: []byte("soon")}}, time.Now().Add(500*time.Millisecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, ctx, r, 1)[0]
	if string(m.Body) != "soon" || m.EnqueuedTime.Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("got %q (scheduled %v)", m.Body, soon)
	}
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "scheduled")
	if err != nil || rt.GetScheduledMessageCount() != 1 {
		t.Fatalf("runtime: %v, %v", rt, err)
	}
}

func (e *env) testDeferAndDeadLetter(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("settle", nil)
	s := e.sender("settle")
	for _, body := range []string{"defer me", "poison"} {
		if err := s.SendMessage(ctx, &client.Message{Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r := e.receiver("settle", nil)
	msgs := receiveN(t, ctx, r, 2)
	if err := r.DeferMessage(ctx, msgs[0], &client.DeferMessageOptions{PropertiesToModify: map[string]any{"deferred": true}}); err != nil {
		t.Fatal(err)
	}
	reason, desc := "BadFormat", "cannot parse"
	if err := r.DeadLetterMessage(ctx, msgs[1], &client.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc, PropertiesToModify: map[string]any{"tries": 1}}); err != nil {
		t.Fatal(err)
	}
	deferred, err := r.ReceiveDeferredMessages(ctx, []int64{msgs[0].SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 || string(deferred[0].Body) != "defer me" || deferred[0].ApplicationProperties["deferred"] != true {
		t.Fatalf("receive deferred: %+v, %v", deferred, err)
	}
	if err := r.CompleteMessage(ctx, deferred[0], nil); err != nil {
		t.Fatal(err)
	}
	dlq := e.receiver("settle", &client.ReceiverOptions{SubQueue: client.SubQueueDeadLetter})
	dead := receiveN(t, ctx, dlq, 1)[0]
	if string(dead.Body) != "poison" || dead.DeadLetterReason != reason || dead.DeadLetterErrorDescription != desc || dead.ApplicationProperties["tries"] != int64(1) {
		t.Fatalf("dead-lettered message: %+v", dead)
	}
	if err := dlq.CompleteMessage(ctx, dead, nil); err != nil {
		t.Fatal(err)
	}
	// Abandon keeps the delivery count and makes the message available.
	if err := s.SendMessage(ctx, &client.Message{Body: []byte("again")}, nil); err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, ctx, r, 1)[0]
	if err := r.AbandonMessage(ctx, m, &client.AbandonMessageOptions{PropertiesToModify: map[string]any{"why": "busy"}}); err != nil {
		t.Fatal(err)
	}
	m2 := receiveN(t, ctx, r, 1)[0]
	if m2.SequenceNumber != m.SequenceNumber || m2.DeliveryCount != 2 || m2.ApplicationProperties["why"] != "busy" {
		t.Fatalf("after abandon: %+v", m2)
	}
	if err := r.CompleteMessage(ctx, m2, nil); err != nil {
		t.Fatal(err)
	}
}

func (e *env) testPipelinedSends(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("pipelined", &admin.QueueProperties{PartitionCount: proto.Uint32(3)})
	s, err := e.c.NewSender("pipelined", &client.NewSenderOptions{MaxInFlight: 8})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*client.Message
	for i := range 60 {
		msgs = append(msgs, &client.Message{MessageID: fmt.Sprint(i), Body: []byte("p"), PartitionKey: fmt.Sprint(i % 7)})
	}
	if err := s.SendMessages(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "pipelined")
	if err != nil || rt.GetActiveMessageCount() != 60 {
		t.Fatalf("runtime: %v, %v", rt, err)
	}
	for _, p := range rt.GetPartitions() {
		if p.GetActiveMessageCount() == 0 {
			t.Fatalf("partition %d got no message: keys are not spread", p.GetPartitionId())
		}
	}
}

func (e *env) testProcessor(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("processed", &admin.QueueProperties{LockDuration: durationpb.New(time.Second)})
	s := e.sender("processed")
	const n = 20
	for i := range n {
		if err := s.SendMessage(ctx, &client.Message{MessageID: fmt.Sprint(i), Body: []byte(fmt.Sprint(i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		finished = make(chan struct{})
	)
	p, err := e.c.NewProcessorForQueue("processed", func(ctx context.Context, ev *client.ProcessMessageEvent) error {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.Message.MessageID]++
		switch {
		case ev.Message.MessageID == "3" && seen["3"] == 1:
			return errors.New("first try fails") // abandoned, redelivered
		case ev.Message.MessageID == "5":
			mu.Unlock()
			// Longer than the lock: only renewal keeps it.
			time.Sleep(2500 * time.Millisecond)
			mu.Lock()
		}
		done := 0
		for _, c := range seen {
			if c > 0 {
				done++
			}
		}
		if done == n && seen["3"] == 2 && seen["5"] == 1 {
			select {
			case <-finished:
			default:
				close(finished)
			}
		}
		return nil
	}, &client.ProcessorOptions{MaxConcurrentCalls: 4, PrefetchCount: 2, ErrorHandler: func(err error) {
		if !strings.Contains(err.Error(), "first try fails") {
			t.Errorf("processor error: %v", err)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatalf("processor did not finish: %v", seen)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["5"] != 1 {
		t.Fatalf("message 5 was delivered %d times: its lock was not renewed", seen["5"])
	}
	// Everything was completed on its own.
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "processed")
	if err != nil || rt.GetTotalMessageCount() != 0 {
		t.Fatalf("runtime after processing: %v, %v", rt, err)
	}
}

func (e *env) testProcessorCloseWaitsForHandlers(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("closing", nil)
	if err := e.sender("closing").SendMessage(ctx, &client.Message{Body: []byte("slow")}, nil); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	handlerSawCancel := make(chan struct{})
	p, err := e.c.NewProcessorForQueue("closing", func(hctx context.Context, ev *client.ProcessMessageEvent) error {
		close(started)
		<-hctx.Done()
		close(handlerSawCancel)
		return hctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	<-started
	grace, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := p.Close(grace); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a handler that outlives the grace period: %v", err)
	}
	select {
	case <-handlerSawCancel:
	default:
		t.Fatal("Close returned before the handler's context was cancelled and it returned")
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The handler failed, so the message was abandoned, not completed.
	r := e.receiver("closing", nil)
	m := receiveN(t, ctx, r, 1)[0]
	if string(m.Body) != "slow" || m.DeliveryCount != 2 {
		t.Fatalf("after Close: %q with %d deliveries", m.Body, m.DeliveryCount)
	}
}

// testPartitionedSequenceNumbers uses sequence numbers of a partitioned
// queue, whose top 16 bits name the partition, to cancel and to receive
// deferred messages in every partition.
func (e *env) testPartitionedSequenceNumbers(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("parts", &admin.QueueProperties{PartitionCount: proto.Uint32(3)})
	s := e.sender("parts")
	var msgs []*client.Message
	for i := range 9 {
		msgs = append(msgs, &client.Message{PartitionKey: fmt.Sprint(i), Body: []byte{byte(i)}})
	}
	seqs, err := s.ScheduleMessages(ctx, msgs, time.Now().Add(time.Hour), nil)
	if err != nil || len(seqs) != 9 {
		t.Fatalf("schedule: %v, %v", seqs, err)
	}
	partitions := map[int64]bool{}
	for _, seq := range seqs {
		partitions[seq>>48] = true
	}
	if len(partitions) < 2 {
		t.Fatalf("9 keys landed in %d partition(s)", len(partitions))
	}
	if err := s.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		t.Fatal(err)
	}
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "parts")
	if err != nil || rt.GetScheduledMessageCount() != 0 {
		t.Fatalf("after cancelling all: %v, %v", rt, err)
	}

	if err := s.SendMessages(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("parts", nil)
	var deferred []int64
	for _, m := range receiveN(t, ctx, r, 9) {
		if uint32(m.SequenceNumber>>48) != m.PartitionID {
			t.Fatalf("sequence number %x does not name partition %d", m.SequenceNumber, m.PartitionID)
		}
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		deferred = append(deferred, m.SequenceNumber)
	}
	got, err := r.ReceiveDeferredMessages(ctx, deferred, nil)
	if err != nil || len(got) != 9 {
		t.Fatalf("receive deferred across partitions: %d messages, %v", len(got), err)
	}
	for _, m := range got {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// testConcurrentCallsKeepTheirOwnOutcomes sends and settles many messages
// at once, so that they travel together, with one bad call among them
// each time: only the bad call fails.
func (e *env) testConcurrentCallsKeepTheirOwnOutcomes(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("together", &admin.QueueProperties{MaxMessageSizeInKilobytes: proto.Int64(1)})
	s := e.sender("together")
	const n = 200
	var msgs []*client.Message
	for i := range n {
		msgs = append(msgs, &client.Message{MessageID: fmt.Sprint(i), Body: []byte(fmt.Sprint(i))})
	}
	msgs = append(msgs[:n/2], append([]*client.Message{{MessageID: "big", Body: make([]byte, 4096)}}, msgs[n/2:]...)...)
	err := s.SendMessages(ctx, msgs)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeMessageSizeExceeded || !strings.HasPrefix(err.Error(), fmt.Sprintf("message %d:", n/2)) ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("sending %d messages and an oversized one: %v, want MESSAGE_SIZE_EXCEEDED for message %d alone", n, err, n/2)
	}

	r := e.receiver("together", nil)
	got := receiveN(t, ctx, r, n)
	seqs := map[int64]bool{}
	for _, m := range got {
		if string(m.Body) != m.MessageID {
			t.Fatalf("message %s holds %q", m.MessageID, m.Body)
		}
		seqs[m.SequenceNumber] = true
	}
	if len(seqs) != n {
		t.Fatalf("%d distinct sequence numbers for %d messages", len(seqs), n)
	}
	bogus := *got[0]
	bogus.LockToken = [16]byte{1}
	errs := make(chan error, n+1)
	for _, m := range append(got, &bogus) {
		go func() { errs <- r.CompleteMessage(ctx, m, nil) }()
	}
	var lost int
	for range n + 1 {
		if err := <-errs; errors.Is(err, client.ErrLockLost) {
			lost++
		} else if err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	if lost != 1 {
		t.Fatalf("%d completions lost their lock, want 1 (the bogus one)", lost)
	}
	rt, err := e.admin.GetQueueRuntimeProperties(ctx, "together")
	if err != nil || rt.GetActiveMessageCount() != 0 {
		t.Fatalf("runtime %v, %v: want the queue empty", rt, err)
	}
}

// testDeadLetterKeepsTheSequenceNumber dead-letters the messages of a
// partitioned queue and finds them in the dead-letter sub-queue by the
// numbers they were sent with.
func (e *env) testDeadLetterKeepsTheSequenceNumber(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("dlseq", &admin.QueueProperties{PartitionCount: proto.Uint32(2)})
	s := e.sender("dlseq")
	sent := map[int64]string{}
	for i := range 6 {
		id := fmt.Sprintf("d%d", i)
		var res client.SendResult
		if err := s.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte(id)}, &client.SendMessageOptions{Result: &res}); err != nil {
			t.Fatal(err)
		}
		sent[res.SequenceNumber] = id
	}
	r := e.receiver("dlseq", nil)
	var seqs []int64
	for _, m := range receiveN(t, ctx, r, 6) {
		if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.SequenceNumber)
	}
	dlq := e.receiver("dlseq", &client.ReceiverOptions{SubQueue: client.SubQueueDeadLetter})
	peeked, err := dlq.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 6 {
		t.Fatalf("peeked %d dead letters, %v", len(peeked), err)
	}
	for _, m := range peeked {
		if sent[m.SequenceNumber] != m.MessageID || m.EnqueuedSequenceNumber != m.SequenceNumber || m.DeadLetterSource != "dlseq" {
			t.Fatalf("dead letter %s has number %x, sent as %x", m.MessageID, m.SequenceNumber, seqByID(sent, m.MessageID))
		}
	}
	for _, m := range receiveN(t, ctx, dlq, 6) {
		if err := dlq.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := dlq.ReceiveDeferredMessages(ctx, seqs, nil)
	if err != nil || len(got) != len(seqs) {
		t.Fatalf("received %d deferred dead letters by number, %v", len(got), err)
	}
	for i, m := range got {
		if m.SequenceNumber != seqs[i] || sent[m.SequenceNumber] != m.MessageID {
			t.Fatalf("deferred dead letter %d: %s numbered %x, asked for %x", i, m.MessageID, m.SequenceNumber, seqs[i])
		}
		if err := dlq.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func seqByID(sent map[int64]string, id string) int64 {
	for seq, x := range sent {
		if x == id {
			return seq
		}
	}
	return 0
}
