package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog/raftlogtest"
)

// flipInNodeLog flips a byte inside the first stored copy of pattern in
// a stopped node's log, and reports whether it found one.
func flipInNodeLog(t *testing.T, dataDir string, pattern []byte) bool {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "log", "*.seg"))
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, pattern); i >= 0 {
			b[i+len(pattern)-1] ^= 0x01
			if err := os.WriteFile(s, b, 0o640); err != nil {
				t.Fatal(err)
			}
			return true
		}
	}
	return false
}

func (c *testCluster) indexOf(id string) int {
	for i := range c.nodes {
		if c.nodeID(i) == id {
			return i
		}
	}
	return -1
}

// damageAReplica creates queue q with one partition, sends it n messages
// ("m000", body "body m000", ...), stops the node of the partition's
// replica at position pos of its placement once it has applied them, and
// damages the body of m007 in that node's log. It returns the queue, the
// stopped node and its address for the restart.
func damageAReplica(t *testing.T, c *testCluster, n, pos int) (e *clusterv1.Entity, v int, addr string) {
	t.Helper()
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(1)})
	for i := range n {
		sendOne(t, c.client(i%3), "q", fmt.Sprintf("m%03d", i))
	}
	e = c.nodes[0].meta.fsm.Entity("q")
	victimID := e.GetPartitions()[0].GetNodeIds()[pos]
	v = c.indexOf(victimID)
	await.Until(t, 20*time.Second, "the victim to apply every send", func() bool {
		r := c.nodes[v].replica(e, 0)
		return r != nil && r.p.Info().AppliedIndex >= uint64(n)
	})
	addr = c.stop(v)
	if !flipInNodeLog(t, filepath.Join(c.dir, victimID), []byte("body m007")) {
		t.Fatal("no stored copy of message m007 in the victim's log")
	}
	return e, v, addr
}

// TestDamagedReplicaIsRebuiltFromItsPeers damages a message body in the
// node log of a partition's preferred leader while it is stopped. On
// restart the node must find the damage, keep the replica closed, have it
// demoted, rebuild it from the others as a non-voter, see it promoted and
// lead again, and every message must come back intact.
func TestDamagedReplicaIsRebuiltFromItsPeers(t *testing.T) {
	c := newTestCluster(t, 3)
	const n = 40
	e, v, addr := damageAReplica(t, c, n, 0) // the preferred leader
	group, victimID := groupName(e, 0), c.nodeID(v)
	nd := c.start(v, addr)
	if _, found := nd.nodeLog.Recovery().Damaged[group]; !found {
		t.Fatalf("restart did not find the damage: %+v", nd.nodeLog.Recovery())
	}

	// Rebuilt: a voter again, healthy, and (as the preferred leader)
	// leading again.
	await.Until(t, 60*time.Second, "the rebuilt replica to lead", func() bool {
		r := nd.replica(e, 0)
		if r == nil || !r.p.IsLeader() {
			return false
		}
		h, _ := nd.health(group)
		return h == raftbusv1.ReplicaHealth_REPLICA_HEALTH_HEALTHY && r.p.Suffrage(victimID) == raft.Voter
	})
	if _, err := os.Stat(nd.rebuildMarkPath(group)); !os.IsNotExist(err) {
		t.Fatalf("rebuild mark left behind: %v", err)
	}

	// Every message, intact, through the rebuilt leader.
	cl := c.client(v)
	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "q", MaxMessages: 50, MaxWait: durationpb.New(time.Second)})
		cancel()
		if err != nil {
			if !isRetryable(err) {
				t.Fatal(err)
			}
			continue
		}
		for _, m := range resp.GetMessages() {
			id := m.GetMessage().GetMessageId()
			if want := "body " + id; string(m.GetMessage().GetBody()) != want {
				t.Fatalf("message %s has body %q, want %q", id, m.GetMessage().GetBody(), want)
			}
			got[id] = true
		}
	}
	if len(got) != n {
		t.Fatalf("received %d of %d messages", len(got), n)
	}
}

// TestDamagedReplicaOnASingleNodeRefusesToStart: with no other copy to
// rebuild from, the node does not start, and says why.
func TestDamagedReplicaOnASingleNodeRefusesToStart(t *testing.T) {
	c := newTestCluster(t, 1)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(1)})
	sendOne(t, c.client(0), "q", "m1")
	addr := c.stop(0)
	if !flipInNodeLog(t, filepath.Join(c.dir, "n1"), []byte("body m1")) {
		t.Fatal("no stored copy of the message")
	}
	_, err := Start(Config{NodeID: "n1", ListenAddr: addr, DataDir: filepath.Join(c.dir, "n1")})
	if err == nil {
		t.Fatal("a single node with a damaged replica started")
	}
	if !bytes.Contains([]byte(err.Error()), []byte("no other copy")) {
		t.Fatalf("error does not say why: %v", err)
	}
}

// TestLostNodeLogRebuildsEveryReplica: a node that finds its log gone
// (an operator moved a damaged one aside) treats every replica it held as
// damaged and rebuilds them all from the others.
func TestLostNodeLogRebuildsEveryReplica(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(3)})
	const n = 30
	for i := range n {
		sendOne(t, c.client(i%3), "q", fmt.Sprintf("m%02d", i))
	}
	e := c.nodes[0].meta.fsm.Entity("q")
	addr := c.stop(2)
	dir := filepath.Join(c.dir, c.nodeID(2))
	if err := os.Rename(filepath.Join(dir, "log"), filepath.Join(dir, "log.damaged")); err != nil {
		t.Fatal(err)
	}
	nd := c.start(2, addr)
	await.Until(t, 60*time.Second, "every replica on the node to vote again", func() bool {
		for id := range uint32(3) {
			r := nd.replica(e, id)
			if r == nil || r.p.Suffrage(nd.ID()) != raft.Voter {
				return false
			}
			if h, _ := nd.health(groupName(e, id)); h != raftbusv1.ReplicaHealth_REPLICA_HEALTH_HEALTHY {
				return false
			}
		}
		return true
	})
	// Each was demoted and promoted again: configuration changes beyond
	// the bootstrap.
	for id := range uint32(3) {
		if changes := configChanges(t, c.nodes[0], groupName(e, id)); changes < 2 {
			t.Fatalf("partition %d: %d configuration changes: the replica was not demoted and promoted", id, changes)
		}
	}
	if got := drain(t, c.client(2), "q", n, 30*time.Second); len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
}

// configChanges counts the configuration entries after the bootstrap in
// nd's log of group.
func configChanges(t *testing.T, nd *Node, group string) int {
	g, err := nd.nodeLog.Group(group)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	n := 0
	for i := max(first, 2); i <= last; i++ {
		var l raft.Log
		if err := g.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogConfiguration {
			n++
		}
	}
	return n
}

// TestReplicaOfAnEntityDeletedWhileDownIsForgotten: a node that was down
// when an entity was deleted drops the entity's replicas from its log and
// disk once it learns of the deletion.
func TestReplicaOfAnEntityDeletedWhileDownIsForgotten(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(1)})
	sendOne(t, c.client(0), "q", "m1")
	e := c.nodes[0].meta.fsm.Entity("q")
	group := groupName(e, 0)
	await.Until(t, 20*time.Second, "node 3 to hold its replica", func() bool { return c.nodes[2].replica(e, 0) != nil })
	addr := c.stop(2)
	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.DeleteQueueResponse, error) {
		return c.client(0).admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: "q"})
	})
	nd := c.start(2, addr)
	await.Until(t, 60*time.Second, "the deleted entity's replica to be forgotten", func() bool {
		for _, g := range nd.nodeLog.Groups() {
			if g == group {
				return false
			}
		}
		_, err := os.Stat(nd.replicaDir(group))
		return os.IsNotExist(err)
	})
}

// TestARebuiltReplicaVotesAgainOnlyOnceItsLeaderSaysSo: a replica rebuilt
// from its leader's log replays the group's older configurations, in which
// it still voted, before the one that made it a non-voter. Its node must
// not take those for its promotion: whenever it reports the replica
// healthy again, the leader must count it a voter.
func TestARebuiltReplicaVotesAgainOnlyOnceItsLeaderSaysSo(t *testing.T) {
	// The victim's disk is slow, so that its replay of the leader's log
	// lasts several rounds of its reconciler.
	disks := map[string]*raftlogtest.Disk{}
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		if disks[cfg.NodeID] == nil {
			disks[cfg.NodeID] = &raftlogtest.Disk{}
		}
		cfg.nodeLogFS = disks[cfg.NodeID]
	})
	// Enough entries that the rebuild's replay takes many AppendEntries.
	e, v, addr := damageAReplica(t, c, 800, 1)
	group, victimID := groupName(e, 0), c.nodeID(v)
	disks[victimID].Slow(5 * time.Millisecond)
	nd := c.start(v, addr)
	leaderSuffrage := func() raft.ServerSuffrage {
		for i, other := range c.nodes {
			if i == v || other == nil {
				continue
			}
			if r := other.replica(e, 0); r != nil && r.p.IsLeader() {
				return r.p.Suffrage(victimID)
			}
		}
		return raft.Staging
	}
	sawRebuilding := false
	await.Until(t, 60*time.Second, "the rebuild to finish", func() bool {
		h, _ := nd.health(group)
		if h != raftbusv1.ReplicaHealth_REPLICA_HEALTH_HEALTHY {
			sawRebuilding = true
			return false
		}
		if s := leaderSuffrage(); sawRebuilding && s != raft.Voter {
			t.Fatalf("%s reports its rebuilt replica healthy while the leader counts it a %v", victimID, s)
		}
		return sawRebuilding
	})
}
