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

// testQuota fills entities up to MaxSizeInMegabytes: messages and session
// states count, each partition holds its share, and a full entity refuses
// sends with CodeQuotaExceeded until something leaves it.
func (e *env) testQuota(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	var addrs []string
	for _, n := range e.cluster.Nodes {
		addrs = append(addrs, n.Addr)
	}
	// QUOTA_EXCEEDED is retryable (receivers may make room): without
	// retries the refusal comes at once.
	c, err := client.New(addrs, &client.ClientOptions{RetryOptions: client.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(s *client.Sender, m *client.Message) error { return s.SendMessage(ctx, m, nil) }
	full := func(err error) bool { return errors.Is(err, client.ErrQuotaExceeded) }

	e.createQueue("quota", &admin.QueueProperties{MaxSizeInMegabytes: proto.Int64(1)})
	s, _ := c.NewSender("quota", nil)
	body := make([]byte, 200<<10)
	for i := range 5 {
		if err := send(s, &client.Message{MessageID: fmt.Sprint(i), Body: body}); err != nil {
			t.Fatalf("send %d of 200 KiB into 1 MiB: %v", i, err)
		}
	}
	if err := send(s, &client.Message{MessageID: "5", Body: body}); !full(err) {
		t.Fatalf("a sixth send of 200 KiB: %v, want quota exceeded", err)
	}
	r, _ := c.NewReceiverForQueue("quota", nil)
	m := receiveN(t, ctx, r, 1)[0]
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if err := send(s, &client.Message{MessageID: "5", Body: body}); err != nil {
		t.Fatalf("send once a message left: %v", err)
	}

	// Two partitions hold 512 KiB each: one partition's key fills it.
	e.createQueue("quota-parts", &admin.QueueProperties{MaxSizeInMegabytes: proto.Int64(1), PartitionCount: proto.Uint32(2)})
	s, _ = c.NewSender("quota-parts", nil)
	for i := range 2 {
		if err := send(s, &client.Message{PartitionKey: "p", Body: body}); err != nil {
			t.Fatalf("send %d to one partition: %v", i, err)
		}
	}
	if err := send(s, &client.Message{PartitionKey: "p", Body: body}); !full(err) {
		t.Fatalf("a third send of 200 KiB to a 512 KiB partition: %v, want quota exceeded", err)
	}

	// Four session states of 256 KiB fill 1 MiB.
	e.createQueue("quota-sessions", &admin.QueueProperties{MaxSizeInMegabytes: proto.Int64(1), RequiresSession: proto.Bool(true)})
	var held []*client.SessionReceiver
	for i := range 4 {
		sr, err := c.AcceptSessionForQueue(ctx, "quota-sessions", fmt.Sprint(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := sr.SetSessionState(ctx, make([]byte, 256<<10), nil); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		held = append(held, sr)
	}
	s, _ = c.NewSender("quota-sessions", nil)
	if err := send(s, &client.Message{SessionID: "x", Body: []byte("x")}); !full(err) {
		t.Fatalf("a send into a queue full of session state: %v, want quota exceeded", err)
	}
	if err := held[0].SetSessionState(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := send(s, &client.Message{SessionID: "x", Body: []byte("x")}); err != nil {
		t.Fatalf("send once a state was cleared: %v", err)
	}
	if err := held[0].SetSessionState(ctx, make([]byte, 256<<10), nil); !full(err) {
		t.Fatalf("a state that no longer fits: %v, want quota exceeded", err)
	}
	for _, sr := range held {
		sr.Close(ctx)
	}
}
