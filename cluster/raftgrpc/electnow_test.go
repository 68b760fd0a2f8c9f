package raftgrpc

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/internal/await"
)

// slowRaftConfig is testRaftConfig with timeouts no test waits out: a
// leader within the test comes from ElectNow, not from a timeout.
func slowRaftConfig(t *testing.T, id raft.ServerID) *raft.Config {
	c := testRaftConfig(t, id)
	c.HeartbeatTimeout = time.Minute
	c.ElectionTimeout = time.Minute
	return c
}

// TestElectNowElectsANewGroupAtOnce: a group just bootstrapped, whose
// timeouts are a minute, has the member that asked for it as leader at
// once, and a vote request that reaches a node before the group opens
// there waits for it rather than failing.
func TestElectNowElectsANewGroupAtOnce(t *testing.T) {
	nodes := startNodes(t, 3)
	const group = "fresh"
	var configuration raft.Configuration
	ids := []raft.ServerID{"a", "b", "c"}
	for i, n := range nodes {
		configuration.Servers = append(configuration.Servers, raft.Server{Suffrage: raft.Voter, ID: ids[i], Address: n.addr})
	}
	start := func(i int) (*raft.Raft, *GroupTransport) {
		trans := nodes[i].openTransport(t, group)
		store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		cfg := slowRaftConfig(t, ids[i])
		if err := raft.BootstrapCluster(cfg, store, store, snaps, trans, configuration); err != nil {
			t.Fatalf("bootstrap %s: %v", ids[i], err)
		}
		r, err := raft.NewRaft(cfg, newKeySetFSM(), store, store, snaps, trans)
		if err != nil {
			t.Fatalf("start raft %s: %v", ids[i], err)
		}
		t.Cleanup(func() { r.Shutdown().Error() })
		return r, trans
	}

	first, trans := start(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := trans.ElectNow(ctx); err != nil {
		t.Fatalf("elect now: %v", err)
	}
	// The candidate's vote request is on its way to nodes that do not run
	// the group yet: it waits there until the group opens.
	await.Until(t, 5*time.Second, "a vote request waiting for its group on the second node", func() bool {
		return nodes[1].mux.waiting.Load() > 0
	})
	start(1)
	await.Until(t, 10*time.Second, "the member that asked to lead", func() bool {
		return first.State() == raft.Leader
	})
	if err := first.Apply([]byte("k"), 5*time.Second).Error(); err != nil {
		t.Fatalf("apply through the new leader: %v", err)
	}
}

// TestAnRPCForAGroupThatNeverOpensFails: the wait for a group is bounded.
func TestAnRPCForAGroupThatNeverOpensFails(t *testing.T) {
	nodes := startNodes(t, 2)
	trans := nodes[0].openTransport(t, "lonely")
	var resp raft.RequestVoteResponse
	start := time.Now()
	err := trans.RequestVote("b", nodes[1].addr, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 1}, &resp)
	if err == nil {
		t.Fatal("a vote request to a node without the group succeeded")
	}
	if waited := time.Since(start); waited < groupOpenWait {
		t.Errorf("the request failed after %s, before the %s wait for the group", waited, groupOpenWait)
	}
}
