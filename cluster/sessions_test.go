package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func sendToSession(t *testing.T, c clients, queue, session, id string) *raftbusv1.SendResult {
	t.Helper()
	resp := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.SendResponse, error) {
		return c.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: queue, Messages: []*raftbusv1.Message{{MessageId: id, SessionId: session}}})
	})
	return resp.GetResults()[0]
}

func acceptNext(t *testing.T, c clients, queue string, wait time.Duration) *raftbusv1.AcceptSessionResponse {
	t.Helper()
	return retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.AcceptSessionResponse, error) {
		return c.msg.AcceptSession(ctx, &raftbusv1.AcceptSessionRequest{EntityPath: queue, MaxWait: durationpb.New(wait)})
	})
}

// TestSessionsAreServedAtTheirPartitionThroughAnyNode sends three sessions
// into a partitioned queue through one node, accepts them through another
// and works them through a third.
func TestSessionsAreServedAtTheirPartitionThroughAnyNode(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders", PartitionCount: proto.Uint32(3), RequiresSession: proto.Bool(true)})
	sessions := []string{"alpha", "bravo", "charlie"}
	for _, s := range sessions {
		for i := range 3 {
			if res := sendToSession(t, c.client(0), "orders", s, fmt.Sprintf("%s-%d", s, i)); res.GetPartitionId() != raftbusv1.PartitionForKey(s, 3) {
				t.Fatalf("session %s sent to partition %d", s, res.GetPartitionId())
			}
		}
	}
	ctx := context.Background()
	var accepted []string
	for range sessions {
		a := acceptNext(t, c.client(1), "orders", 5*time.Second)
		if a.GetSessionId() == "" || a.GetPartitionId() != raftbusv1.PartitionForKey(a.GetSessionId(), 3) || len(a.GetLockToken()) != 16 {
			t.Fatalf("accepted %v", a)
		}
		accepted = append(accepted, a.GetSessionId())
		sl := &raftbusv1.SessionLock{SessionId: a.GetSessionId(), LockToken: a.GetLockToken()}
		worker := c.client(2)
		var got []string
		for {
			resp, err := worker.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: 10, Session: sl})
			if err != nil {
				t.Fatalf("receive in %s: %v", sl.SessionId, err)
			}
			if len(resp.GetMessages()) == 0 {
				break
			}
			for _, m := range resp.GetMessages() {
				got = append(got, m.GetMessage().GetMessageId())
				if _, err := worker.msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: &raftbusv1.MessageLock{
					EntityPath: "orders", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken(),
				}}); err != nil {
					t.Fatalf("complete: %v", err)
				}
			}
		}
		want := []string{sl.SessionId + "-0", sl.SessionId + "-1", sl.SessionId + "-2"}
		if !slices.Equal(got, want) {
			t.Fatalf("session %s: received %v, want %v", sl.SessionId, got, want)
		}
		if _, err := c.client(0).msg.SetSessionState(ctx, &raftbusv1.SetSessionStateRequest{EntityPath: "orders", Session: sl, State: []byte("done")}); err != nil {
			t.Fatalf("set state: %v", err)
		}
		st, err := c.client(1).msg.GetSessionState(ctx, &raftbusv1.GetSessionStateRequest{EntityPath: "orders", Session: sl})
		if err != nil || string(st.GetState()) != "done" {
			t.Fatalf("get state: %q %v", st.GetState(), err)
		}
		if _, err := c.client(2).msg.RenewSessionLock(ctx, &raftbusv1.RenewSessionLockRequest{EntityPath: "orders", Session: sl}); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if _, err := c.client(0).msg.CloseSession(ctx, &raftbusv1.CloseSessionRequest{EntityPath: "orders", Session: sl}); err != nil {
			t.Fatalf("close: %v", err)
		}
		if _, err := c.client(1).msg.CloseSession(ctx, &raftbusv1.CloseSessionRequest{EntityPath: "orders", Session: sl}); reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST {
			t.Fatalf("close twice: %v, want SESSION_LOCK_LOST", err)
		}
	}
	slices.Sort(accepted)
	if !slices.Equal(accepted, sessions) {
		t.Fatalf("accepted %v", accepted)
	}
	if a := acceptNext(t, c.client(1), "orders", 100*time.Millisecond); a.GetSessionId() != "" {
		t.Fatalf("accepted %v with every session drained", a)
	}
	// The state outlives the messages.
	a := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.AcceptSessionResponse, error) {
		return c.client(2).msg.AcceptSession(ctx, &raftbusv1.AcceptSessionRequest{EntityPath: "orders", SessionId: "bravo"})
	})
	st, err := c.client(0).msg.GetSessionState(ctx, &raftbusv1.GetSessionStateRequest{EntityPath: "orders", Session: &raftbusv1.SessionLock{SessionId: "bravo", LockToken: a.GetLockToken()}})
	if err != nil || string(st.GetState()) != "done" {
		t.Fatalf("state after the messages: %q %v", st.GetState(), err)
	}
}

func TestAcceptNextSessionWaitsAcrossPartitions(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders", PartitionCount: proto.Uint32(3), RequiresSession: proto.Bool(true)})
	done := make(chan *raftbusv1.AcceptSessionResponse, 1)
	errs := make(chan error, 1)
	go func() {
		a, err := c.client(1).msg.AcceptSession(context.Background(), &raftbusv1.AcceptSessionRequest{EntityPath: "orders", MaxWait: durationpb.New(20 * time.Second)})
		if err != nil {
			errs <- err
			return
		}
		done <- a
	}()
	sendToSession(t, c.client(2), "orders", "late", "m0")
	select {
	case a := <-done:
		if a.GetSessionId() != "late" {
			t.Fatalf("accepted %v, want session late", a)
		}
	case err := <-errs:
		t.Fatalf("accept next: %v", err)
	}
}

func TestSessionErrorsHaveTheirReasons(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "sessions", RequiresSession: proto.Bool(true)})
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "plain"})
	sendToSession(t, cl, "sessions", "a", "m0")
	ctx := context.Background()
	a, err := cl.msg.AcceptSession(ctx, &raftbusv1.AcceptSessionRequest{EntityPath: "sessions", SessionId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	wrong := &raftbusv1.SessionLock{SessionId: "a", LockToken: make([]byte, 16)}
	cases := []struct {
		name string
		call func() error
		want raftbusv1.ErrorReason
	}{
		{"accept a held session", func() error {
			_, err := cl.msg.AcceptSession(ctx, &raftbusv1.AcceptSessionRequest{EntityPath: "sessions", SessionId: "a"})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED},
		{"receive with a wrong session token", func() error {
			_, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "sessions", Session: wrong})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST},
		{"state with a wrong session token", func() error {
			_, err := cl.msg.GetSessionState(ctx, &raftbusv1.GetSessionStateRequest{EntityPath: "sessions", Session: wrong})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST},
		{"oversized state", func() error {
			_, err := cl.msg.SetSessionState(ctx, &raftbusv1.SetSessionStateRequest{EntityPath: "sessions",
				Session: &raftbusv1.SessionLock{SessionId: "a", LockToken: a.GetLockToken()}, State: make([]byte, 256<<10+1)})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED},
		{"receive from a session queue without a session", func() error {
			_, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "sessions"})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{"accept on a queue without sessions", func() error {
			_, err := cl.msg.AcceptSession(ctx, &raftbusv1.AcceptSessionRequest{EntityPath: "plain"})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{"session lock without a token", func() error {
			_, err := cl.msg.CloseSession(ctx, &raftbusv1.CloseSessionRequest{EntityPath: "sessions", Session: &raftbusv1.SessionLock{SessionId: "a"}})
			return err
		}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := errorInfo(t, tc.call())
			if info.Reason != tc.want || info.Message == "" {
				t.Fatalf("got %v, want reason %v with a message", info, tc.want)
			}
		})
	}
	peek, err := cl.msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "sessions", SessionId: "a", MaxMessages: 10})
	if err != nil || len(peek.GetMessages()) != 1 || peek.GetMessages()[0].GetMessage().GetSessionId() != "a" {
		t.Fatalf("peek by session: %v %v", peek, err)
	}

	// A message lock taken under a session ends with it.
	sl := &raftbusv1.SessionLock{SessionId: "a", LockToken: a.GetLockToken()}
	got, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "sessions", Session: sl})
	if err != nil || len(got.GetMessages()) != 1 {
		t.Fatalf("receive in session: %v %v", got, err)
	}
	if _, err := cl.msg.CloseSession(ctx, &raftbusv1.CloseSessionRequest{EntityPath: "sessions", Session: sl}); err != nil {
		t.Fatal(err)
	}
	m := got.GetMessages()[0]
	_, err = cl.msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: &raftbusv1.MessageLock{EntityPath: "sessions", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST {
		t.Fatalf("complete after the session was closed: %v, want SESSION_LOCK_LOST", err)
	}
}
