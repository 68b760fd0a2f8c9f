package azsdk

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client/admin"
)

// TestSessionsThroughTheAzureSDK accepts named and next available
// sessions, receives a session's messages in order and keeps its state.
func TestSessionsThroughTheAzureSDK(t *testing.T) {
	b := startBroker(t)
	ctx := testContext(t)
	const q = "carts"
	if _, err := b.admin.CreateQueue(ctx, q, &admin.QueueProperties{RequiresSession: to.Ptr(true)}); err != nil {
		t.Fatal(err)
	}
	s := b.sender(t, q)
	for _, m := range []struct{ session, body string }{{"s1", "a1"}, {"s1", "a2"}, {"s1", "a3"}, {"s2", "b1"}} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(m.body), SessionID: to.Ptr(m.session)}, nil); err != nil {
			t.Fatal(err)
		}
	}

	named, err := b.sb.AcceptSessionForQueue(ctx, q, "s2", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A session receiver peeks at its session only.
	peeked, err := named.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 1 || string(peeked[0].Body) != "b1" {
		t.Fatalf("session s2 peeked %d messages, %v", len(peeked), err)
	}
	msgs, err := named.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "b1" || *msgs[0].SessionID != "s2" {
		t.Fatalf("session s2 gave %d messages, %v", len(msgs), err)
	}
	if err := named.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	if err := named.Close(ctx); err != nil {
		t.Fatal(err)
	}

	next, err := b.sb.AcceptNextSessionForQueue(ctx, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(context.Background())
	if next.SessionID() != "s1" || !next.LockedUntil().After(time.Now()) {
		t.Fatalf("next session %q locked until %v", next.SessionID(), next.LockedUntil())
	}
	var got []string
	for len(got) < 3 {
		msgs, err := next.ReceiveMessages(ctx, 3-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, string(m.Body))
			if err := next.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got[0] != "a1" || got[1] != "a2" || got[2] != "a3" {
		t.Fatalf("session s1 gave %v, want [a1 a2 a3]", got)
	}
	if err := next.SetSessionState(ctx, []byte("checkout"), nil); err != nil {
		t.Fatal(err)
	}
	state, err := next.GetSessionState(ctx, nil)
	if err != nil || string(state) != "checkout" {
		t.Fatalf("session state %q, %v", state, err)
	}
	before := next.LockedUntil()
	if err := next.RenewSessionLock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if next.LockedUntil().Before(before) {
		t.Fatalf("renewed session lock ends %v, before %v", next.LockedUntil(), before)
	}

	// Listing sessions is not served yet: a clear error, no hang.
	if _, err := b.sb.NewListSessionsForQueuePager(q, nil).NextPage(ctx); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("listing sessions: %v, want an error saying it is not supported", err)
	}

	// No session has messages left: accepting the next one times out
	// with the SDK's timeout error, no hang.
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = b.sb.AcceptNextSessionForQueue(short, q, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeTimeout {
		t.Fatalf("accept next with no session available: %v, want a timeout", err)
	}
}
