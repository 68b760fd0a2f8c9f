package raftgrpc

import (
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// TestEntriesWakeADormantGroupAndHeartbeatsDoNot: a group a node closed
// while idle opens for an AppendEntries that carries entries, which waits
// for it and is answered by it; heartbeats and commit-only AppendEntries
// are refused without waking it (a leader about to close sends them).
func TestEntriesWakeADormantGroupAndHeartbeatsDoNot(t *testing.T) {
	const group = "sleepy"
	var woken atomic.Int64
	var b *testNode
	b = startNode(t, Config{
		Dormant: func(g string) bool { return g == group && woken.Load() == 0 },
		Wake: func(g string) {
			if woken.Add(1) != 1 {
				return
			}
			go func() {
				trans := b.openTransport(t, g)
				for rpc := range trans.Consumer() {
					rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true, LastLog: 1}, nil)
				}
			}()
		},
	})
	a := startNode(t, Config{})
	trans := a.openTransport(t, group)
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte(a.addr)}

	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries("b", b.addr, &raft.AppendEntriesRequest{RPCHeader: header, Term: 1}, &resp); err == nil {
		t.Fatal("a heartbeat to a dormant group succeeded")
	}
	commitOnly := &raft.AppendEntriesRequest{RPCHeader: header, Term: 1, PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1}
	if err := trans.AppendEntries("b", b.addr, commitOnly, &resp); err == nil {
		t.Fatal("an AppendEntries without entries to a dormant group succeeded")
	}
	if n := woken.Load(); n != 0 {
		t.Fatalf("woken %d times by RPCs without entries", n)
	}
	withEntries := &raft.AppendEntriesRequest{RPCHeader: header, Term: 1, LeaderCommitIndex: 1,
		Entries: []*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}}
	if err := trans.AppendEntries("b", b.addr, withEntries, &resp); err != nil {
		t.Fatalf("AppendEntries with entries to a dormant group: %v", err)
	}
	if !resp.Success || woken.Load() != 1 {
		t.Fatalf("response %+v, woken %d times; want success from the group woken once", resp, woken.Load())
	}
}
