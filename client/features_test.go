package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func sqlRule(name, expr string) *admin.RuleProperties {
	return &admin.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr}}}}
}

func (e *env) testTopicsAndRules(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	if _, err := e.admin.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CreateSubscription(ctx, "events", "all", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CreateSubscription(ctx, "events", "eu", nil, sqlRule("eu", "region = 'eu'")); err != nil {
		t.Fatal(err)
	}
	_, err := e.admin.CreateRule(ctx, "events", "eu", sqlRule("broken", "region ="))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeInvalidArgument || ce.Retryable {
		t.Fatalf("malformed filter: %v, want a non-retryable INVALID_ARGUMENT", err)
	}
	s := e.sender("events")
	for i, region := range []string{"eu", "us", "eu"} {
		m := &client.Message{MessageID: fmt.Sprint(i), Body: []byte(region), ApplicationProperties: map[string]any{"region": region}}
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.c.NewReceiverForSubscription("events", "all", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveN(t, ctx, all, 3); len(got) != 3 {
		t.Fatalf("all received %d", len(got))
	}
	eu, err := e.c.NewReceiverForSubscription("events", "eu", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range receiveN(t, ctx, eu, 2) {
		if string(m.Body) != "eu" {
			t.Fatalf("eu subscription got %q", m.Body)
		}
		if err := eu.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := e.admin.GetTopicRuntimeProperties(ctx, "events")
	if err != nil || rt.GetSubscriptionCount() != 2 {
		t.Fatalf("topic runtime %v, %v", rt, err)
	}
	rules, err := e.admin.ListRules(ctx, "events", "eu")
	if err != nil || len(rules) != 1 || rules[0].GetName() != "eu" {
		t.Fatalf("rules %v, %v", rules, err)
	}
}

func (e *env) testSessions(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("carts", &admin.QueueProperties{RequiresSession: proto.Bool(true)})
	s := e.sender("carts")
	for i := 0; i < 3; i++ {
		if err := s.SendMessage(ctx, &client.Message{MessageID: fmt.Sprint(i), Body: []byte(fmt.Sprint(i)), SessionID: "cart-1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sr, err := e.c.AcceptNextSessionForQueue(ctx, "carts", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sr.SessionID() != "cart-1" || !sr.LockedUntil().After(time.Now()) {
		t.Fatalf("accepted %q until %v", sr.SessionID(), sr.LockedUntil())
	}
	// Retryable (the holder may let it go). Asked once, so that the
	// caller's deadline cannot cut an attempt short, which would leave
	// its outcome unknown.
	once, err := client.New(e.cluster.Addrs(), &client.ClientOptions{RetryOptions: client.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	_, err = once.AcceptSessionForQueue(ctx, "carts", "cart-1", nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeSessionCannotBeLocked || !ce.Retryable {
		t.Fatalf("second accept of a held session: %v, want a retryable SESSION_CANNOT_BE_LOCKED", err)
	}
	msgs, err := sr.ReceiveMessages(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if len(msgs) != 3 || string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("received %d messages, %d: %q, want 3 in session order", len(msgs), i, m.Body)
		}
		if err := sr.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := sr.SetSessionState(ctx, []byte("checked out"), nil); err != nil {
		t.Fatal(err)
	}
	if err := sr.RenewSessionLock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := sr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := e.c.AcceptSessionForQueue(ctx, "carts", "cart-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if state, err := again.GetSessionState(ctx, nil); err != nil || string(state) != "checked out" {
		t.Fatalf("state kept after the messages are gone: %q, %v", state, err)
	}
	again.Close(ctx)
}

func (e *env) testSessionProcessor(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("session-proc", &admin.QueueProperties{RequiresSession: proto.Bool(true), PartitionCount: proto.Uint32(2)})
	s := e.sender("session-proc")
	const sessions, each = 3, 4
	for i := 0; i < each; i++ {
		for k := 0; k < sessions; k++ {
			m := &client.Message{MessageID: fmt.Sprint(k, "-", i), Body: []byte(fmt.Sprint(i)), SessionID: fmt.Sprint("s", k)}
			if err := s.SendMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	seen := make(map[string][]string)
	done := make(chan struct{})
	p, err := e.c.NewSessionProcessorForQueue("session-proc", func(_ context.Context, ev *client.ProcessSessionMessageEvent) error {
		mu.Lock()
		defer mu.Unlock()
		id := ev.Session.SessionID()
		seen[id] = append(seen[id], string(ev.Message.Body))
		total := 0
		for _, v := range seen {
			total += len(v)
		}
		if total == sessions*each {
			close(done)
		}
		return nil
	}, &client.SessionProcessorOptions{MaxConcurrentSessions: 2, SessionIdleTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("processed %v", seen)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for id, bodies := range seen {
		for i, b := range bodies {
			if b != fmt.Sprint(i) {
				t.Fatalf("session %s processed out of order: %v", id, bodies)
			}
		}
	}
}

func (e *env) testSendResult(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("results", &admin.QueueProperties{PartitionCount: proto.Uint32(2), RequiresDuplicateDetection: proto.Bool(true)})
	s := e.sender("results")
	var first, again client.SendResult
	m := &client.Message{MessageID: "once", Body: []byte("x"), PartitionKey: "k"}
	if err := s.SendMessage(ctx, m, &client.SendMessageOptions{Result: &first}); err != nil {
		t.Fatal(err)
	}
	if first.SequenceNumber == 0 || uint32(uint64(first.SequenceNumber)>>48) != first.PartitionID || first.Duplicate || first.EnqueuedTime.IsZero() {
		t.Fatalf("result %+v", first)
	}
	if err := s.SendMessage(ctx, m, &client.SendMessageOptions{Result: &again}); err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.SequenceNumber != first.SequenceNumber || !again.EnqueuedTime.Equal(first.EnqueuedTime) {
		t.Fatalf("resend within the duplicate window: %+v", again)
	}
}

// Messages with a MessageId and no session id or partition key may go to
// any partition, unless the entity detects duplicates: then a MessageId
// picks the partition, so that a resend meets its first copy. The ids are
// picked to share one partition by hash. Free to go anywhere, they share
// the serving node's partition of the moment (here, one node leading
// every partition).
func (e *env) testKeylessSendsGoAnywhereAndDuplicatesMeet(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	const parts = 4
	var ids []string
	for i := 0; len(ids) < 2*parts; i++ {
		if id := fmt.Sprintf("order-%d", i); raftbusv1.PartitionForKey(id, parts) == 1 {
			ids = append(ids, id)
		}
	}
	e.createQueue("turns", &admin.QueueProperties{PartitionCount: proto.Uint32(parts)})
	e.createQueue("turns-dedup", &admin.QueueProperties{PartitionCount: proto.Uint32(parts), RequiresDuplicateDetection: proto.Bool(true)})
	turns, dedup := e.sender("turns"), e.sender("turns-dedup")
	perPartition := map[uint32]int{}
	for _, id := range ids {
		var res client.SendResult
		if err := turns.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte(id)}, &client.SendMessageOptions{Result: &res}); err != nil {
			t.Fatal(err)
		}
		perPartition[res.PartitionID]++
		if err := dedup.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte(id)}, &client.SendMessageOptions{Result: &res}); err != nil {
			t.Fatal(err)
		}
		if res.PartitionID != 1 {
			t.Fatalf("%s went to partition %d of the entity that detects duplicates, not its MessageId's (1)", id, res.PartitionID)
		}
	}
	if len(perPartition) != 1 {
		t.Fatalf("one send after another took partitions %v, not the node's partition of the moment", perPartition)
	}
}
