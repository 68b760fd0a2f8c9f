package raftgrpc

import (
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A node shutting down takes no leadership: TimeoutNow to it fails with
// UNAVAILABLE and never reaches its group.
func TestRefuseLeadershipTurnsTimeoutNowAway(t *testing.T) {
	leader, follower := startNode(t, Config{}), startNode(t, Config{})
	from := leader.openTransport(t, "g")
	to := follower.openTransport(t, "g")
	follower.mux.RefuseLeadership()
	args := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte(leader.addr)}}
	err := from.TimeoutNow("n2", follower.addr, args, &raft.TimeoutNowResponse{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("TimeoutNow to a node refusing leadership: %v, want UNAVAILABLE", err)
	}
	select {
	case rpc := <-to.Consumer():
		t.Fatalf("the refused TimeoutNow reached the group: %T", rpc.Command)
	default:
	}
}
