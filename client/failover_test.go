package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

// TestFollowsLeaderChange sends through a 3-node cluster, kills the
// partition's leader and keeps sending: the client must find the new
// leader by itself, and the messages with ids must all arrive once.
func TestFollowsLeaderChange(t *testing.T) {
	e := startEnv(t, 3)
	ctx := ctxT(t, 90*time.Second)
	e.createQueue("failover", &admin.QueueProperties{
		RequiresDuplicateDetection:          proto.Bool(true),
		DuplicateDetectionHistoryTimeWindow: durationpb.New(time.Minute),
	})
	s := e.sender("failover")
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if err := s.SendMessage(ctx, &client.Message{MessageID: fmt.Sprint(i), Body: []byte("f")}, nil); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	}
	send(0, 10)

	routes, err := e.admin.GetRoutingTable(ctx, "failover")
	if err != nil || len(routes) != 1 {
		t.Fatalf("routing table: %v, %v", routes, err)
	}
	leader := routes[0].GetPartitions()[0].GetLeaderAddress()
	victim := -1
	for i, n := range e.cluster.Nodes {
		if n.Addr == leader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("leader %q is none of the nodes", leader)
	}
	// A client that knows only a follower learns the leader from the
	// routing table and then calls it directly: pausing the follower does
	// not stop its sends.
	follower := (victim + 1) % 3
	direct, err := client.New([]string{e.cluster.Nodes[follower].Addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ds, _ := direct.NewSender("failover", nil)
	if err := ds.SendMessage(ctx, &client.Message{MessageID: "direct-1", Body: []byte("d")}, nil); err != nil {
		t.Fatal(err)
	}
	e.cluster.Pause(follower)
	shortCtx := ctxT(t, 5*time.Second)
	err = ds.SendMessage(shortCtx, &client.Message{MessageID: "direct-2", Body: []byte("d")}, nil)
	e.cluster.Resume(follower)
	if err != nil {
		t.Fatalf("send with the seed node paused: %v (not sent to the leader directly)", err)
	}

	e.cluster.Kill(victim)

	send(10, 20)
	r := e.receiver("failover", nil)
	got := map[string]int{}
	for _, m := range receiveN(t, ctx, r, 22) {
		got[m.MessageID]++
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 22 {
		id := fmt.Sprint(i)
		if i >= 20 {
			id = fmt.Sprintf("direct-%d", i-19)
		}
		if got[id] != 1 {
			t.Fatalf("message %s arrived %d times", id, got[id])
		}
	}
	routes, err = e.admin.GetRoutingTable(ctx, "failover")
	if err != nil || routes[0].GetPartitions()[0].GetLeaderAddress() == leader {
		t.Fatalf("after the kill the leader is still %v (%v)", routes, err)
	}
}

// TestSendFailsWhenClusterIsGone checks that a send to a cluster that is
// gone ends with a retryable *Error once the retries are spent, well
// before the caller's deadline.
func TestSendFailsWhenClusterIsGone(t *testing.T) {
	e := startEnv(t, 1)
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("gone", nil)
	s := e.sender("gone")
	if err := s.SendMessage(ctx, &client.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	e.cluster.Kill(0)
	few, err := client.New([]string{e.cluster.Nodes[0].Addr}, &client.ClientOptions{RetryOptions: client.RetryOptions{MaxRetries: 3, RetryDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer few.Close()
	s, _ = few.NewSender("gone", nil)
	err = s.SendMessage(ctx, &client.Message{Body: []byte("y")}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeServerBusy || !ce.Retryable || !strings.Contains(ce.Message, "unreachable") {
		t.Fatalf("send to a dead node: %v, want a retryable unreachable error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the send was retried until the deadline")
	}
}
