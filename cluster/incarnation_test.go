package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/internal/await"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// refusal is what a wiped node must be told.
const refusal = "join under a new id, or restore its data dir"

// waitIncarnations waits until node i's committed membership records an
// incarnation for every node of the cluster, and returns them by node id.
func (c *testCluster) waitIncarnations(i int) map[string]string {
	c.t.Helper()
	out := make(map[string]string)
	await.Until(c.t, 15*time.Second, "every member's incarnation to be recorded", func() bool {
		clear(out)
		c.nodes[i].meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
			for _, m := range s.Nodes {
				if m.Incarnation != "" {
					out[m.NodeId] = m.Incarnation
				}
			}
		})
		return len(out) == len(c.nodes)
	})
	return out
}

func (c *testCluster) dataDir(i int) string { return filepath.Join(c.dir, c.nodeID(i)) }

// TestAWipedNodeIsRefusedAndTheClusterKeepsServing: a node whose data dir
// was wiped comes back under its old id, by --join or with the peer list
// that formed the cluster. It is refused with what to do, writes no Raft
// state, and the cluster keeps serving. A normal restart still works.
func TestAWipedNodeIsRefusedAndTheClusterKeepsServing(t *testing.T) {
	c := newTestCluster(t, 3)
	known := c.waitIncarnations(0)
	for i, nd := range c.nodes {
		if got := nd.self().Incarnation; got != known[c.nodeID(i)] {
			t.Fatalf("%s runs as incarnation %s, the cluster knows %s", c.nodeID(i), got, known[c.nodeID(i)])
		}
	}
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders", PartitionCount: proto.Uint32(2)})
	sendOne(t, c.client(0), "orders", "before")

	addr := c.stop(2)
	if err := os.RemoveAll(c.dataDir(2)); err != nil {
		t.Fatal(err)
	}
	peers := map[string]string{"n1": c.nodes[0].Addr(), "n2": c.nodes[1].Addr(), "n3": addr}
	for name, cfg := range map[string]Config{
		"join":  {Join: c.nodes[0].Addr()},
		"peers": {Peers: peers},
	} {
		cfg.NodeID, cfg.ListenAddr, cfg.DataDir = "n3", addr, c.dataDir(2)
		nd, err := Start(cfg)
		if err == nil {
			nd.Close()
			t.Fatalf("%s: a wiped n3 started", name)
		}
		if !strings.Contains(err.Error(), refusal) || !strings.Contains(err.Error(), known["n3"]) {
			t.Fatalf("%s: refused with %q, want it to name the known incarnation and say %q", name, err, refusal)
		}
		if _, err := os.Stat(filepath.Join(c.dataDir(2), "meta")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the refused node wrote Raft state (%v)", name, err)
		}
	}
	// Two of three serve on.
	sendOne(t, c.client(1), "orders", "after")
	if got := drain(t, c.client(0), "orders", 2, 30*time.Second); got["before"] == 0 || got["after"] == 0 {
		t.Fatalf("received %v", got)
	}

	// A node restarted on its own data dir is let back in.
	c.start(1, c.stop(1))
	sendOne(t, c.client(1), "orders", "restarted")
}

// TestAWipedNodeThatFoundNoPeersStopsWhenTheyReturn: with every peer
// down a wiped node cannot be told at start; it forms its group alone,
// but the first peer to reach it knows it by its old incarnation and it
// stops, having taken part in nothing.
func TestAWipedNodeThatFoundNoPeersStopsWhenTheyReturn(t *testing.T) {
	c := newTestCluster(t, 3)
	c.waitIncarnations(0)
	addrs := []string{c.stop(0), c.stop(1), c.stop(2)}
	if err := os.RemoveAll(c.dataDir(2)); err != nil {
		t.Fatal(err)
	}
	wiped, err := Start(Config{NodeID: "n3", ListenAddr: addrs[2], DataDir: c.dataDir(2), Clock: c.clocks[2],
		Peers: map[string]string{"n1": addrs[0], "n2": addrs[1], "n3": addrs[2]}})
	if err != nil {
		t.Fatalf("start the wiped node with its peers down: %v", err)
	}
	defer wiped.Close()
	c.start(0, addrs[0])
	c.start(1, addrs[1])
	select {
	case err := <-wiped.Failed():
		if !strings.Contains(err.Error(), refusal) {
			t.Fatalf("the wiped node stopped with %q, want it to say %q", err, refusal)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wiped node is still running 20s after its peers came back")
	}
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders"})
	sendOne(t, c.client(1), "orders", "served by two")
}

// TestRaftTrafficFromAWipedOrForeignNodeIsRefused: every Raft RPC says
// who sends it, and a node refuses one from an incarnation its membership
// does not know under that id, or from another cluster, before Raft sees
// it.
func TestRaftTrafficFromAWipedOrForeignNodeIsRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	known := c.waitIncarnations(0)
	cluster := c.nodes[0].self().ClusterID
	conn := c.nodes[0].peers // any client connection to n1 will do
	cc, err := conn.Get(c.nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	raft := raftv1.NewRaftTransportServiceClient(cc)
	vote := func(id identity.Identity) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = metadata.NewOutgoingContext(ctx, identity.Outgoing(id, identity.Identity{NodeID: "n1", Incarnation: known["n1"]}))
		_, err := raft.RequestVote(ctx, &raftv1.RequestVoteRequest{Group: "meta", Term: 1,
			Header: &raftv1.RPCHeader{ProtocolVersion: 3, Id: []byte(id.NodeID), Addr: []byte(c.nodes[2].Addr())}})
		return err
	}
	if err := vote(identity.Identity{ClusterID: cluster, NodeID: "n3", Incarnation: known["n3"]}); err != nil {
		t.Fatalf("a vote request from n3 as the cluster knows it: %v", err)
	}
	for name, id := range map[string]identity.Identity{
		"wiped":   {NodeID: "n3", Incarnation: identity.NewUUID()},
		"foreign": {ClusterID: identity.NewUUID(), NodeID: "n3", Incarnation: known["n3"]},
	} {
		if err := vote(id); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s: %v, want PERMISSION_DENIED", name, err)
		}
	}
}
