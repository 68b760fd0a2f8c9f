package client_test

import (
	"errors"
	"fmt"
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
	e.cluster.Kill(victim)

	send(10, 20)
	r := e.receiver("failover", nil)
	got := map[string]int{}
	for _, m := range receiveN(t, ctx, r, 20) {
		got[m.MessageID]++
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if got[fmt.Sprint(i)] != 1 {
			t.Fatalf("message %d arrived %d times", i, got[fmt.Sprint(i)])
		}
	}
	routes, err = e.admin.GetRoutingTable(ctx, "failover")
	if err != nil || routes[0].GetPartitions()[0].GetLeaderAddress() == leader {
		t.Fatalf("after the kill the leader is still %v (%v)", routes, err)
	}
}

// TestSendFailsWhenClusterIsGone checks the rule that a
// send whose outcome is unknown is not silently repeated: with no
// MessageId and the only node gone, the caller gets an *Error.
func TestSendFailsWhenClusterIsGone(t *testing.T) {
	e := startEnv(t, 1)
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("gone", nil)
	s := e.sender("gone")
	if err := s.SendMessage(ctx, &client.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	e.cluster.Kill(0)
	err := s.SendMessage(ctx, &client.Message{Body: []byte("y")}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeOutcomeUnknown {
		t.Fatalf("send to a dead node: %v, want outcome unknown", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the send without a message id was retried until the deadline")
	}
}
