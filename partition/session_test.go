package partition_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/partition"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func sessionQueue(t *testing.T) *partition.Partition {
	t.Helper()
	c := newTestCluster(t, 3, nil)
	p := c.replicas[c.leader()]
	requires := true
	configure(t, p, &raftbusv1.QueueProperties{RequiresSession: &requires})
	return p
}

func sendToSession(t *testing.T, p *partition.Partition, session, id string) {
	t.Helper()
	if _, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{MessageId: id, SessionId: session})); err != nil {
		t.Fatalf("send %s to %s: %v", id, session, err)
	}
}

func TestAcceptNextSessionWaitsForAMessage(t *testing.T) {
	p := sessionQueue(t)
	ctx := context.Background()
	type accepted struct {
		r   *enginev1.AcceptSessionResult
		err error
	}
	done := make(chan accepted, 1)
	go func() {
		r, err := p.AcceptSession(ctx, &enginev1.AcceptSession{EntityPath: queue}, 10*time.Second)
		done <- accepted{r, err}
	}()
	sendToSession(t, p, "s1", "m0")
	got := <-done
	if got.err != nil || got.r.GetSessionId() != "s1" || len(got.r.GetLockToken()) != 16 {
		t.Fatalf("accept next: %v %v, want session s1", got.r, got.err)
	}
}

func TestIdleAcceptNextSessionProposesNothing(t *testing.T) {
	p := sessionQueue(t)
	before := p.Raft().LastIndex()
	r, err := p.AcceptSession(context.Background(), &enginev1.AcceptSession{EntityPath: queue}, 100*time.Millisecond)
	if err != nil || r.GetSessionId() != "" {
		t.Fatalf("accept next on an empty queue: %v %v", r, err)
	}
	if after := p.Raft().LastIndex(); after != before {
		t.Fatalf("the log grew from %d to %d while no session was available", before, after)
	}
	_, err = p.AcceptSession(context.Background(), &enginev1.AcceptSession{EntityPath: "nope"}, time.Minute)
	if partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("accept next on an unknown entity: %v, want NOT_FOUND at once", err)
	}
}

func TestSessionReceiveWaitsForThatSessionsMessage(t *testing.T) {
	p := sessionQueue(t)
	ctx := context.Background()
	s, err := p.AcceptSession(ctx, &enginev1.AcceptSession{EntityPath: queue, SessionId: "s1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	lock := &enginev1.Lock{EntityPath: queue, MaxMessages: 1, SessionId: "s1", SessionLockToken: s.GetLockToken()}
	type received struct {
		msgs []*raftbusv1.ReceivedMessage
		err  error
	}
	done := make(chan received, 1)
	go func() {
		msgs, err := p.Receive(ctx, lock, 10*time.Second)
		done <- received{msgs, err}
	}()
	sendToSession(t, p, "s2", "other")
	sendToSession(t, p, "s1", "mine")
	got := <-done
	if got.err != nil || len(got.msgs) != 1 || got.msgs[0].GetMessage().GetMessageId() != "mine" {
		t.Fatalf("session receive: %v %v, want the message of s1", got.msgs, got.err)
	}
}

func TestSessionReceiveWithLostLockFailsAtOnce(t *testing.T) {
	p := sessionQueue(t)
	ctx := context.Background()
	s, err := p.AcceptSession(ctx, &enginev1.AcceptSession{EntityPath: queue, SessionId: "s1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_ReleaseSession{ReleaseSession: &enginev1.ReleaseSession{
		EntityPath: queue, SessionId: "s1", LockToken: s.GetLockToken(),
	}}}); err != nil {
		t.Fatal(err)
	}
	lock := &enginev1.Lock{EntityPath: queue, MaxMessages: 1, SessionId: "s1", SessionLockToken: s.GetLockToken()}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.Receive(ctx, lock, time.Minute); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST {
		t.Fatalf("receive under a released session: %v, want SESSION_LOCK_LOST", err)
	}
}

func TestSessionReceiveEndsWhenTheSessionLockExpires(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.replicas[c.leader()]
	requires := true
	configure(t, p, &raftbusv1.QueueProperties{RequiresSession: &requires, LockDuration: durationpb.New(300 * time.Millisecond)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := p.AcceptSession(ctx, &enginev1.AcceptSession{EntityPath: queue, SessionId: "s1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	lock := &enginev1.Lock{EntityPath: queue, MaxMessages: 1, SessionId: "s1", SessionLockToken: s.GetLockToken()}
	// Nothing arrives; the Tick that expires the session lock wakes the
	// receive, which then fails instead of waiting out its minute.
	if _, err := p.Receive(ctx, lock, time.Minute); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST {
		t.Fatalf("receive under an expiring session: %v, want SESSION_LOCK_LOST", err)
	}
}
