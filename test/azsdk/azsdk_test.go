package azsdk

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestAzureSDK runs the Service Bus SDK's everyday operations against one
// node, each case on a queue of its own.
func TestAzureSDK(t *testing.T) {
	b := startBroker(t)

	t.Run("SendReceiveComplete", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "orders")
		before := time.Now().Add(-time.Minute)
		err := b.sender(t, q).SendMessage(ctx, &azservicebus.Message{
			Body: []byte("hello"), MessageID: to.Ptr("m-1"), Subject: to.Ptr("greeting"),
			ContentType: to.Ptr("text/plain"), CorrelationID: to.Ptr("c-1"), TimeToLive: to.Ptr(time.Hour),
			ApplicationProperties: map[string]any{"tenant": "a", "attempt": int64(3), "ok": true},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := b.receiver(t, q, nil)
		m := receiveOne(t, ctx, r)
		if string(m.Body) != "hello" || m.MessageID != "m-1" || *m.Subject != "greeting" || *m.ContentType != "text/plain" || *m.CorrelationID != "c-1" {
			t.Fatalf("received %+v", m)
		}
		if m.ApplicationProperties["tenant"] != "a" || m.ApplicationProperties["attempt"] != int64(3) || m.ApplicationProperties["ok"] != true {
			t.Fatalf("application properties %v", m.ApplicationProperties)
		}
		if m.SequenceNumber == nil || m.EnqueuedTime == nil || m.EnqueuedTime.Before(before) || m.LockedUntil == nil || !m.LockedUntil.After(*m.EnqueuedTime) {
			t.Fatalf("broker properties: seq %v, enqueued %v, locked until %v", m.SequenceNumber, m.EnqueuedTime, m.LockedUntil)
		}
		if m.TimeToLive == nil || *m.TimeToLive != time.Hour || m.ExpiresAt == nil || !m.ExpiresAt.Equal(m.EnqueuedTime.Add(time.Hour)) {
			t.Fatalf("time to live %v, expires at %v", m.TimeToLive, m.ExpiresAt)
		}
		if m.DeliveryCount != 1 || m.LockToken == ([16]byte{}) {
			t.Fatalf("delivery count %d, lock token %x", m.DeliveryCount, m.LockToken)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		if left, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 0 {
			t.Fatalf("after complete, peek = %d messages, %v", len(left), err)
		}
		// The lock ended with the message.
		var sbErr *azservicebus.Error
		if err := r.RenewMessageLock(ctx, m, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
			t.Fatalf("renewing the lock of a completed message: %v, want a lost lock", err)
		}
	})

	t.Run("ApplicationPropertyTypes", func(t *testing.T) { testPropertyTypes(t, b) })

	t.Run("SendBatch", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "batch")
		s := b.sender(t, q)
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{"a", "b", "c"} {
			if err := batch.AddMessage(&azservicebus.Message{Body: []byte(body)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		r := b.receiver(t, q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		var got []string
		for len(got) < 3 {
			msgs, err := r.ReceiveMessages(ctx, 3-len(got), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				got = append(got, string(m.Body))
			}
		}
		if got[0] != "a" || got[1] != "b" || got[2] != "c" {
			t.Fatalf("received %v, want [a b c] in order", got)
		}
	})

	t.Run("AbandonRedelivers", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "abandon")
		send(t, ctx, b.sender(t, q), "again")
		r := b.receiver(t, q, nil)
		m := receiveOne(t, ctx, r)
		if err := r.AbandonMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		m2 := receiveOne(t, ctx, r)
		if *m2.SequenceNumber != *m.SequenceNumber || m2.DeliveryCount != m.DeliveryCount+1 {
			t.Fatalf("redelivered seq %d count %d after seq %d count %d", *m2.SequenceNumber, m2.DeliveryCount, *m.SequenceNumber, m.DeliveryCount)
		}
		if err := r.CompleteMessage(ctx, m2, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("DeadLetterWithReason", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "poison")
		send(t, ctx, b.sender(t, q), "bad")
		r := b.receiver(t, q, nil)
		m := receiveOne(t, ctx, r)
		err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("invalid"), ErrorDescription: to.Ptr("no such customer")})
		if err != nil {
			t.Fatal(err)
		}
		dlq := b.receiver(t, q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
		d := receiveOne(t, ctx, dlq)
		if string(d.Body) != "bad" || *d.SequenceNumber != *m.SequenceNumber {
			t.Fatalf("dead-lettered %q seq %d, want %q seq %d", d.Body, *d.SequenceNumber, "bad", *m.SequenceNumber)
		}
		if d.DeadLetterReason == nil || *d.DeadLetterReason != "invalid" || d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != "no such customer" {
			t.Fatalf("dead-letter reason %v, description %v", d.DeadLetterReason, d.DeadLetterErrorDescription)
		}
		if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
			t.Fatal(err)
		}
	})

	// A lock belongs to the message, not to the connection it came on:
	// another client settles it through its $management node.
	t.Run("SettleOnAnotherConnection", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "handover")
		send(t, ctx, b.sender(t, q), "h1")
		m := receiveOne(t, ctx, b.receiver(t, q, nil))
		other, err := azservicebus.NewClientFromConnectionString(b.connectionString, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(ctx)
		r2, err := other.NewReceiverForQueue(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close(ctx)
		if err := r2.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatalf("complete on another connection: %v", err)
		}
		if left, err := r2.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 0 {
			t.Fatalf("after complete, peek = %d messages, %v", len(left), err)
		}
	})

	t.Run("SubscriptionDeadLetterQueue", func(t *testing.T) {
		ctx := testContext(t)
		if _, err := b.admin.CreateTopic(ctx, "alerts", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.admin.CreateSubscription(ctx, "alerts", "pager", nil, nil); err != nil {
			t.Fatal(err)
		}
		send(t, ctx, b.sender(t, "alerts"), "a1")
		r, err := b.sb.NewReceiverForSubscription("alerts", "pager", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		m := receiveOne(t, ctx, r)
		if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("unroutable")}); err != nil {
			t.Fatal(err)
		}
		dlq, err := b.sb.NewReceiverForSubscription("alerts", "pager", &azservicebus.ReceiverOptions{
			SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		defer dlq.Close(ctx)
		d := receiveOne(t, ctx, dlq)
		if string(d.Body) != "a1" || d.DeadLetterReason == nil || *d.DeadLetterReason != "unroutable" {
			t.Fatalf("subscription dead-letter queue gave %q, reason %v", d.Body, d.DeadLetterReason)
		}
	})

	t.Run("ReceiveAndDelete", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "fireandforget")
		send(t, ctx, b.sender(t, q), "once")
		r := b.receiver(t, q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		m := receiveOne(t, ctx, r)
		if string(m.Body) != "once" {
			t.Fatalf("received %q", m.Body)
		}
		if left, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 0 {
			t.Fatalf("after receive-and-delete, peek = %d messages, %v", len(left), err)
		}
	})

	t.Run("PeekAndRenewLock", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "peek")
		s := b.sender(t, q)
		send(t, ctx, s, "p1")
		send(t, ctx, s, "p2")
		r := b.receiver(t, q, nil)
		peeked, err := r.PeekMessages(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(peeked) != 2 || string(peeked[0].Body) != "p1" || string(peeked[1].Body) != "p2" || peeked[0].State != azservicebus.MessageStateActive {
			t.Fatalf("peeked %d messages", len(peeked))
		}
		m := receiveOne(t, ctx, r)
		before := *m.LockedUntil
		if err := r.RenewMessageLock(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		if m.LockedUntil.Before(before) {
			t.Fatalf("renewed lock ends %v, before %v", *m.LockedUntil, before)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ScheduleAndCancel", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "later")
		s := b.sender(t, q)
		at := time.Now().Add(time.Hour)
		seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("s1")}, {Body: []byte("s2")}}, at, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 2 {
			t.Fatalf("sequence numbers %v", seqs)
		}
		r := b.receiver(t, q, nil)
		peeked, err := r.PeekMessages(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(peeked) != 2 || peeked[0].State != azservicebus.MessageStateScheduled || peeked[0].ScheduledEnqueueTime == nil ||
			peeked[0].ScheduledEnqueueTime.Sub(at).Abs() > time.Second {
			t.Fatalf("peeked %d scheduled messages", len(peeked))
		}
		// A message sent with a scheduled enqueue time is scheduled too.
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("s3"), ScheduledEnqueueTime: &at}, nil); err != nil {
			t.Fatal(err)
		}
		peeked, err = r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))})
		if err != nil || len(peeked) != 3 || peeked[2].State != azservicebus.MessageStateScheduled || string(peeked[2].Body) != "s3" {
			t.Fatalf("after a scheduled send, peeked %d messages, %v", len(peeked), err)
		}
		seqs = append(seqs, *peeked[2].SequenceNumber)
		if err := s.CancelScheduledMessages(ctx, seqs, nil); err != nil {
			t.Fatal(err)
		}
		if left, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 0 {
			t.Fatalf("after cancel, peek = %d messages, %v", len(left), err)
		}
	})

	t.Run("DeferAndReceiveDeferred", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "deferred")
		send(t, ctx, b.sender(t, q), "d1")
		r := b.receiver(t, q, nil)
		m := receiveOne(t, ctx, r)
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || string(got[0].Body) != "d1" || got[0].State != azservicebus.MessageStateDeferred {
			t.Fatalf("received %d deferred messages", len(got))
		}
		// Settled through the management node: it came from no link.
		if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
			t.Fatal(err)
		}
		if left, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 0 {
			t.Fatalf("after completing the deferred message, peek = %d messages, %v", len(left), err)
		}
	})

	t.Run("TopicSubscriptionsWithSQLRule", func(t *testing.T) {
		ctx := testContext(t)
		if _, err := b.admin.CreateTopic(ctx, "events", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.admin.CreateSubscription(ctx, "events", "audit", nil, nil); err != nil {
			t.Fatal(err)
		}
		eu := &admin.RuleProperties{Name: "eu", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{
			SqlFilter: &raftbusv1.SqlFilter{SqlExpression: "region = 'eu' AND attempt > 1"}}}}
		if _, err := b.admin.CreateSubscription(ctx, "events", "eu", nil, eu); err != nil {
			t.Fatal(err)
		}
		s := b.sender(t, "events")
		for _, m := range []struct {
			body, region string
			attempt      int32
		}{{"e1", "eu", 2}, {"e2", "us", 2}, {"e3", "eu", 1}} {
			err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(m.body),
				ApplicationProperties: map[string]any{"region": m.region, "attempt": m.attempt}}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		receiveAll := func(sub string, n int) []string {
			r, err := b.sb.NewReceiverForSubscription("events", sub, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			var got []string
			for len(got) < n {
				msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs {
					got = append(got, string(m.Body))
					if err := r.CompleteMessage(ctx, m, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if left, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 0 {
				t.Fatalf("subscription %s: %d messages left after %v, %v", sub, len(left), got, err)
			}
			return got
		}
		if got := receiveAll("audit", 3); len(got) != 3 {
			t.Fatalf("audit received %v", got)
		}
		if got := receiveAll("eu", 1); got[0] != "e1" {
			t.Fatalf("the SQL rule's subscription received %v, want [e1]", got)
		}
	})

	// What other SDKs do that the Go SDK does not: drain the credit of
	// a receiver on an empty queue, which must end at once.
	t.Run("DrainOnAnEmptyQueue", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "drained")
		conn, err := amqp.Dial(ctx, "amqp://"+b.cluster.Nodes[0].AMQPAddr, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sess.NewReceiver(ctx, q, &amqp.ReceiverOptions{Credit: -1, SettlementMode: amqp.ReceiverSettleModeSecond.Ptr()})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.IssueCredit(5); err != nil {
			t.Fatal(err)
		}
		if err := r.DrainCredit(ctx, nil); err != nil {
			t.Fatalf("drain: %v", err)
		}
		// The link still works after the drain.
		send(t, ctx, b.sender(t, q), "after drain")
		if err := r.IssueCredit(1); err != nil {
			t.Fatal(err)
		}
		m, err := r.Receive(ctx, nil)
		if err != nil || string(m.GetData()) != "after drain" {
			t.Fatalf("received %v, %v", m, err)
		}
		if err := r.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MessageSizeIsTheEntitys", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "sized") // 256 KiB messages, the default
		s := b.sender(t, q)
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 200<<10)}, nil); err != nil {
			t.Fatalf("a 200 KiB message: %v", err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 300<<10)}, nil); err == nil {
			t.Fatal("a 300 KiB message was sent to a queue of 256 KiB messages")
		}
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			err = batch.AddMessage(&azservicebus.Message{Body: make([]byte, 10<<10)}, nil)
		}
		if !errors.Is(err, azservicebus.ErrMessageTooLarge) || batch.NumBytes() > 256<<10 {
			t.Fatalf("batch full at %d bytes: %v", batch.NumBytes(), err)
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatalf("a full batch of %d messages: %v", batch.NumMessages(), err)
		}
	})

	// The Go SDK releases what its leftover credit brings in between
	// ReceiveMessages calls. Service Bus does not count such deliveries,
	// and neither may we: else a message no one looked at goes to the
	// dead-letter queue after MaxDeliveryCount releases.
	t.Run("ReleasedDeliveriesAreNotCounted", func(t *testing.T) {
		ctx := testContext(t)
		q := b.queue(t, "released")
		send(t, ctx, b.sender(t, q), "r1")
		conn, err := amqp.Dial(ctx, "amqp://"+b.cluster.Nodes[0].AMQPAddr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sess.NewReceiver(ctx, q, &amqp.ReceiverOptions{Credit: -1, SettlementMode: amqp.ReceiverSettleModeSecond.Ptr()})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.IssueCredit(2); err != nil {
			t.Fatal(err)
		}
		deliver := func() *amqp.Message {
			t.Helper()
			m, err := r.Receive(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.GetData()) != "r1" || m.Header == nil || m.Header.DeliveryCount != 0 {
				t.Fatalf("delivered %q with %d earlier deliveries counted, want r1 with none", m.GetData(), m.Header.DeliveryCount)
			}
			return m
		}
		// Released twice, the second time with no credit left to bring
		// it back; then taken.
		if err := r.ReleaseMessage(ctx, deliver()); err != nil {
			t.Fatal(err)
		}
		if err := r.ReleaseMessage(ctx, deliver()); err != nil {
			t.Fatal(err)
		}
		if err := r.IssueCredit(1); err != nil {
			t.Fatal(err)
		}
		if err := r.AcceptMessage(ctx, deliver()); err != nil {
			t.Fatal(err)
		}
		if left, err := b.receiver(t, q, nil).PeekMessages(ctx, 10, nil); err != nil || len(left) != 0 {
			t.Fatalf("after accept, peek = %d messages, %v", len(left), err)
		}

		// Through the SDK: a receive that ends before its credit is used
		// leaves the rest for its releaser; the next receive gets the
		// message first delivered then, still once delivered.
		s := b.sender(t, q)
		send(t, ctx, s, "s1")
		sdk := b.receiver(t, q, nil)
		first, err := sdk.ReceiveMessages(ctx, 5, nil)
		if err != nil || len(first) != 1 {
			t.Fatalf("received %d, %v", len(first), err)
		}
		if err := sdk.CompleteMessage(ctx, first[0], nil); err != nil {
			t.Fatal(err)
		}
		send(t, ctx, s, "s2")
		m := receiveOne(t, ctx, sdk)
		if string(m.Body) != "s2" || m.DeliveryCount != 1 {
			t.Fatalf("received %q delivered %d times, want s2 once", m.Body, m.DeliveryCount)
		}
		if err := sdk.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("UnknownQueueFails", func(t *testing.T) {
		ctx := testContext(t)
		s, err := b.sb.NewSender("nosuchqueue", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
		// The SDK passes a link's AMQP error through, as it does
		// against Service Bus.
		var amqpErr *amqp.Error
		if !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotFound {
			t.Fatalf("send to an unknown queue: %v, want a not-found error", err)
		}
	})
}
