package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestForwardingConfigurationIsRefused(t *testing.T) {
	c := newTestCluster(t, 1)
	admin := c.client(0).admin
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, name := range []string{"q1", "q2", "q3", "q4", "q5"} {
		createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: name})
	}
	// q1 -> q2 -> q3 -> q4 -> q5: four hops.
	for _, hop := range [][2]string{{"q4", "q5"}, {"q3", "q4"}, {"q2", "q3"}, {"q1", "q2"}} {
		if _, err := admin.UpdateQueue(ctx, &raftbusv1.UpdateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: hop[0], ForwardTo: hop[1]}}); err != nil {
			t.Fatalf("forward %s to %s: %v", hop[0], hop[1], err)
		}
	}
	if _, err := admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name string
		call func() error
		want string
	}{
		{"itself", func() error {
			_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "self", ForwardTo: "self"}})
			return err
		}, "cannot forward to itself"},
		{"missing", func() error {
			_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "x", ForwardDeadLetteredMessagesTo: "nowhere"}})
			return err
		}, "not an existing queue or topic"},
		{"loop", func() error {
			_, err := admin.UpdateQueue(ctx, &raftbusv1.UpdateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "q5", ForwardTo: "q2"}})
			return err
		}, "loop: q5 -> q2 -> q3 -> q4 -> q5"},
		{"five hops", func() error {
			_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "x", ForwardTo: "q1"}})
			return err
		}, "chain of 5 hops"},
		{"a subscription to its topic", func() error {
			_, err := admin.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{
				TopicName: "t", SubscriptionName: "s", ForwardTo: "t"}})
			return err
		}, "loop"},
	}
	for _, r := range refused {
		err := r.call()
		if info := errorInfo(t, err); info.Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT with %q", r.name, err, r.want)
		}
	}
	// Nothing was stored.
	for _, name := range []string{"self", "x"} {
		if _, err := admin.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: name}); reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
			t.Errorf("queue %s after a refused create: %v", name, err)
		}
	}
	if q, err := admin.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: "q5"}); err != nil || q.GetQueue().GetForwardTo() != "" {
		t.Errorf("q5 after a refused update: %v %v", q, err)
	}
}

// runtime reads an entity's runtime properties (a queue's, or with topic
// set a subscription's).
func runtime(t testing.TB, c clients, name string) *raftbusv1.RuntimeProperties {
	t.Helper()
	if topic, sub, ok := strings.Cut(name, "/subscriptions/"); ok {
		return retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.GetSubscriptionRuntimePropertiesResponse, error) {
			return c.admin.GetSubscriptionRuntimeProperties(ctx, &raftbusv1.GetSubscriptionRuntimePropertiesRequest{TopicName: topic, SubscriptionName: sub})
		}).GetProperties()
	}
	return retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
		return c.admin.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: name})
	}).GetProperties()
}

// awaitForwarded waits until nothing of name is in transfer.
func awaitForwarded(t testing.TB, c *testCluster, node int, name string) {
	t.Helper()
	await.Until(t, 60*time.Second, "every message of "+name+" forwarded", func() bool {
		return runtime(t, c.client(node), name).GetTransferMessageCount() == 0
	})
}

// TestForwardingSurvivesTheLossOfSourceAndTargetLeaders sends to a
// partitioned queue that forwards to another partitioned queue while the
// leader of a source partition, and later that of a target partition, is
// stopped: every message arrives in the target exactly once.
func TestForwardingSurvivesTheLossOfSourceAndTargetLeaders(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "out", PartitionCount: proto.Uint32(2)})
	// Duplicate detection at the source makes a client's resend after an
	// unknown outcome harmless there; the target has none: only the
	// transfers' own check keeps duplicates out of it.
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "in", PartitionCount: proto.Uint32(2), ForwardTo: "out",
		RequiresDuplicateDetection: proto.Bool(true)})

	const perPhase = 40
	next := 0
	sendBurst := func(via int) {
		for range perPhase {
			sendOne(t, c.client(via), "in", fmt.Sprintf("m%03d", next))
			next++
		}
	}
	sendBurst(0)
	victim := c.leaderOf("in", 0)
	addr := c.stop(victim)
	sendBurst((victim + 1) % 3)
	c.start(victim, addr)

	sendBurst(victim)
	victim = c.leaderOf("out", 1)
	addr = c.stop(victim)
	sendBurst((victim + 1) % 3)
	c.start(victim, addr)
	sendBurst(victim)

	awaitForwarded(t, c, 0, "in")
	got := drain(t, c.client(1), "out", next, 60*time.Second)
	for i := range next {
		if id := fmt.Sprintf("m%03d", i); got[id] != 1 {
			t.Errorf("message %s received %d times", id, got[id])
		}
	}
	if rt := runtime(t, c.client(2), "out"); rt.GetTotalMessageCount() != 0 {
		t.Fatalf("%d messages left in the target after each was received once: duplicates", rt.GetTotalMessageCount())
	}
	if rt := runtime(t, c.client(2), "in"); rt.GetTotalMessageCount() != 0 {
		t.Fatalf("%d messages left in the source", rt.GetTotalMessageCount())
	}

	// A forwarder whose answer was lost sends the same transfers again,
	// from whichever node leads the source then: through a node that does
	// not lead the target partition, twice, they arrive once.
	via := (c.leaderOf("out", 0) + 1) % 3
	e := c.nodes[via].meta.fsm.Entity("out")
	accept := &enginev1.AcceptTransfer{EntityPath: "out", Stream: "elsewhere@1/0", Messages: []*enginev1.TransferredMessage{
		{Number: 7, Message: &raftbusv1.Message{MessageId: "again"}}, {Number: 8, Message: &raftbusv1.Message{MessageId: "again2"}},
	}}
	for attempt := range 2 {
		res := retry(t, 20*time.Second, func(ctx context.Context) ([]*raftbusv1.SendResult, error) {
			return c.nodes[via].acceptTransfer(ctx, e, 0, accept)
		})
		if len(res) != 2 || res[0].GetDuplicate() != (attempt == 1) || res[1].GetDuplicate() != (attempt == 1) {
			t.Fatalf("attempt %d: %v", attempt, res)
		}
	}
	if n := len(drain(t, c.client(via), "out", 2, 20*time.Second)); n != 2 {
		t.Fatalf("%d repeated transfers received", n)
	}
	if rt := runtime(t, c.client(2), "out"); rt.GetTotalMessageCount() != 0 {
		t.Fatalf("a repeated transfer was enqueued twice")
	}
}

// TestSubscriptionsAndDeadLettersForwardAndDeadLetterForADeletedTarget: a
// subscription forwards its copies and its dead letters (which carry their
// reason), and messages whose target is deleted go to its dead-letter
// sub-queue, with the reason TransferFailed, until a queue of that name
// exists again.
func TestSubscriptionsAndDeadLettersForwardAndDeadLetterForADeletedTarget(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "copies"})
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "errors"})
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "work", ForwardDeadLetteredMessagesTo: "errors"})
	if _, err := cl.admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "events"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.admin.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{
		TopicName: "events", SubscriptionName: "audit", ForwardTo: "copies"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events", Messages: []*raftbusv1.Message{
		{MessageId: "e0", Body: []byte("event"), Subject: "s", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "v"}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "copies", MaxWait: durationpb.New(10 * time.Second)})
	if err != nil || len(resp.GetMessages()) != 1 {
		t.Fatalf("the subscription's copy: %v %v", resp, err)
	}
	if m := resp.GetMessages()[0].GetMessage(); m.GetMessageId() != "e0" || string(m.GetBody()) != "event" || m.GetSubject() != "s" ||
		m.GetApplicationProperties()["k"].GetStringValue() != "v" {
		t.Fatalf("forwarded copy %v lost what was sent", m)
	}

	sendOne(t, cl, "work", "w0")
	got, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "work", MaxWait: durationpb.New(10 * time.Second)})
	if err != nil || len(got.GetMessages()) != 1 {
		t.Fatalf("receive: %v %v", got, err)
	}
	lock := &raftbusv1.MessageLock{EntityPath: "work", PartitionId: got.GetMessages()[0].GetPartitionId(), LockToken: got.GetMessages()[0].GetLockToken()}
	if _, err := cl.msg.DeadLetter(ctx, &raftbusv1.DeadLetterRequest{Lock: lock, Reason: "poison"}); err != nil {
		t.Fatal(err)
	}
	resp, err = cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "errors", MaxWait: durationpb.New(10 * time.Second)})
	if err != nil || len(resp.GetMessages()) != 1 {
		t.Fatalf("the dead letter: %v %v", resp, err)
	}
	if m := resp.GetMessages()[0].GetMessage(); m.GetMessageId() != "w0" || m.GetApplicationProperties()["DeadLetterReason"].GetStringValue() != "poison" {
		t.Fatalf("forwarded dead letter %v", m)
	}
	// The target has the dead letter once its transfer is accepted there;
	// the source lets go of it with the next command of its forwarder.
	awaitForwarded(t, c, 0, "work")
	if rt := runtime(t, cl, "work"); rt.GetDeadLetterMessageCount() != 0 || rt.GetTotalMessageCount() != 0 {
		t.Fatalf("the source kept its dead letter: %v", rt)
	}

	// The target goes: the subscription's copies, which no forwarder
	// sent it, are dead-lettered where they are, each once.
	if _, err := cl.admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: "copies"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events", Messages: []*raftbusv1.Message{{MessageId: fmt.Sprintf("e%d", i+1)}}}); err != nil {
			t.Fatal(err)
		}
	}
	awaitForwarded(t, c, 0, "events/subscriptions/audit")
	if rt := runtime(t, cl, "events/subscriptions/audit"); rt.GetDeadLetterMessageCount() != 3 || rt.GetTotalMessageCount() != 3 {
		t.Fatalf("with its target deleted, the subscription counts %v", rt)
	}
	dl, err := cl.msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "events/subscriptions/audit", SubQueue: raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, MaxMessages: 10})
	if err != nil || len(dl.GetMessages()) != 3 {
		t.Fatalf("peek the dead letters: %v %v", dl, err)
	}
	for i, m := range dl.GetMessages() {
		if m.GetMessage().GetMessageId() != fmt.Sprintf("e%d", i+1) || m.GetDeadLetterReason() != "TransferFailed" ||
			!strings.Contains(m.GetDeadLetterErrorDescription(), `"copies"`) || !strings.Contains(m.GetDeadLetterErrorDescription(), "deleted") {
			t.Fatalf("dead letter %d: %v", i, m)
		}
	}
	// A queue of that name gets what comes after.
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "copies"})
	if _, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events", Messages: []*raftbusv1.Message{{MessageId: "e4"}}}); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, cl, "copies", 1, 20*time.Second); got["e4"] != 1 {
		t.Fatalf("the target created again got %v", got)
	}

	// A forwarder backing off from a missing target ends with its node.
	closeWithin(t, c.nodes[0], 5*time.Second)
	c.nodes[0] = nil
}

// TestAMessageTheTargetRefusesIsDeadLetteredInItsSource: a target with a
// smaller size limit refuses a message sent with others in one batch; that
// message goes to its source's dead-letter sub-queue and the others
// arrive.
func TestAMessageTheTargetRefusesIsDeadLetteredInItsSource(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "small", MaxMessageSizeInKilobytes: proto.Int64(1)})
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "in", ForwardTo: "small"})
	if _, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "in", Messages: []*raftbusv1.Message{
		{MessageId: "a"}, {MessageId: "big", Body: make([]byte, 2048)}, {MessageId: "b"},
	}}); err != nil {
		t.Fatal(err)
	}
	awaitForwarded(t, c, 0, "in")
	resp, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "in", SubQueue: raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, MaxWait: durationpb.New(10 * time.Second)})
	if err != nil || len(resp.GetMessages()) != 1 {
		t.Fatalf("the source's dead letters: %v %v", resp, err)
	}
	if m := resp.GetMessages()[0]; m.GetMessage().GetMessageId() != "big" || m.GetDeadLetterReason() != "TransferFailed" ||
		!strings.Contains(m.GetDeadLetterErrorDescription(), `forwarding to "small" failed`) {
		t.Fatalf("dead letter %v", m)
	}
	got := drain(t, cl, "small", 2, 20*time.Second)
	if got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("the target received %v, want a and b", got)
	}
}

// TestLargeMessagesAreForwardedInBatchesAPartitionTakes: messages near the
// largest size go a few to a batch, within what one command may hold.
func TestLargeMessagesAreForwardedInBatchesAPartitionTakes(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "big-out", MaxMessageSizeInKilobytes: proto.Int64(1024)})
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "big-in", MaxMessageSizeInKilobytes: proto.Int64(1024), ForwardTo: "big-out"})
	for i := range 3 {
		m := &raftbusv1.Message{MessageId: fmt.Sprintf("b%d", i), Body: make([]byte, 1000<<10)}
		if _, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "big-in", Messages: []*raftbusv1.Message{m}}); err != nil {
			t.Fatal(err)
		}
	}
	awaitForwarded(t, c, 0, "big-in")
	if rt := runtime(t, cl, "big-out"); rt.GetActiveMessageCount() != 3 {
		t.Fatalf("the target holds %v", rt)
	}
	if rt := runtime(t, cl, "big-in"); rt.GetDeadLetterMessageCount() != 0 {
		t.Fatalf("the source dead-lettered %d", rt.GetDeadLetterMessageCount())
	}
}
