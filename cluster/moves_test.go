package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/internal/await"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// moveTimeout bounds how long the tests wait for replica moves to settle.
const moveTimeout = 90 * time.Second

// placements is node i's view of queue's placements.
func (c *testCluster) placements(i int, queue string) []*clusterv1.Placement {
	e := c.nodes[i].meta.fsm.Entity(queue)
	if e == nil {
		return nil
	}
	return e.GetPartitions()
}

// settled reports whether, in node i's view, no replica of queue is
// moving and each partition's replicas are within allowed, want of them.
func (c *testCluster) settled(i int, queue string, want int, allowed ...string) bool {
	pls := c.placements(i, queue)
	if pls == nil {
		return false
	}
	for _, pl := range pls {
		if pl.GetMove() != nil || len(pl.GetNodeIds()) != want {
			return false
		}
		for _, id := range pl.GetNodeIds() {
			if !slices.Contains(allowed, id) {
				return false
			}
		}
	}
	return true
}

// groupVoters is the configuration of partition id of queue as its
// leader has it: the voters' ids, sorted.
func (c *testCluster) groupVoters(queue string, id uint32) []string {
	nd := c.nodes[c.leaderOf(queue, id)]
	r := nd.replica(nd.meta.fsm.Entity(queue), id)
	if r == nil {
		return nil
	}
	members, err := r.p.Members()
	if err != nil {
		return nil
	}
	var voters []string
	for _, s := range members {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		} else {
			voters = append(voters, string(s.ID)+"(non-voter)")
		}
	}
	slices.Sort(voters)
	return voters
}

// awaitGroups waits until every partition of queue has exactly the voters
// its placement names, as the partition's leader sees it.
func (c *testCluster) awaitGroups(queue string, parts uint32, from int) {
	c.t.Helper()
	for id := range parts {
		await.Until(c.t, moveTimeout, fmt.Sprintf("%s/%d to have the voters its placement names", queue, id), func() bool {
			want := slices.Clone(c.placements(from, queue)[id].GetNodeIds())
			slices.Sort(want)
			return slices.Equal(c.groupVoters(queue, id), want)
		})
	}
}

// sender sends to queue until stopped, recording every id acknowledged.
type sender struct {
	stop  chan struct{}
	done  sync.WaitGroup
	mu    sync.Mutex
	acked []string
}

func startSender(t *testing.T, cl clients, queue string) *sender {
	s := &sender{stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			id := fmt.Sprintf("m%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: queue, Messages: []*raftbusv1.Message{{MessageId: id, Body: []byte("body " + id)}}})
			cancel()
			if err == nil {
				s.mu.Lock()
				s.acked = append(s.acked, id)
				s.mu.Unlock()
			} else if !isRetryable(err) {
				t.Errorf("send %s: %v", id, err)
				return
			}
		}
	}()
	return s
}

// finish stops the sender and returns what was acknowledged.
func (s *sender) finish() []string {
	close(s.stop)
	s.done.Wait()
	return s.acked
}

// checkAllThere receives every acknowledged message from queue.
func checkAllThere(t *testing.T, cl clients, queue string, acked []string) {
	t.Helper()
	if len(acked) == 0 {
		t.Fatal("no send was acknowledged")
	}
	got := drain(t, cl, queue, len(acked), 60*time.Second)
	for _, id := range acked {
		if got[id] == 0 {
			t.Errorf("acknowledged message %s lost", id)
		}
	}
}

func TestDrainMovesEveryReplicaOffUnderLoad(t *testing.T) {
	c := newTestCluster(t, 4)
	const parts = 4
	createQueue(t, c.client(1), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(parts), RequiresDuplicateDetection: proto.Bool(true)})
	s := startSender(t, c.client(1), "q")

	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.DrainNodeResponse, error) {
		return c.client(2).admin.DrainNode(ctx, &raftbusv1.DrainNodeRequest{NodeId: "n1"})
	})
	await.Until(t, moveTimeout, "n1 to hold no replica", func() bool { return c.settled(1, "q", 3, "n2", "n3", "n4") })
	c.awaitGroups("q", parts, 1)
	await.Until(t, moveTimeout, "n1 to close its replicas", func() bool {
		c.nodes[0].mu.RLock()
		defer c.nodes[0].mu.RUnlock()
		return len(c.nodes[0].replicas) == 0
	})
	await.Until(t, moveTimeout, "n1 to leave the metadata group's voters", func() bool {
		info, err := c.client(1).admin.GetClusterInfo(context.Background(), &raftbusv1.GetClusterInfoRequest{})
		if err != nil {
			return false
		}
		voters := 0
		for _, n := range info.GetNodes() {
			if n.GetMetadataVoter() {
				voters++
				if n.GetNodeId() == "n1" {
					return false
				}
			}
		}
		return voters == 3
	})
	acked := s.finish()

	// The drained node can go: everything is served without it.
	c.stop(0)
	checkAllThere(t, c.client(2), "q", acked)
}

func TestRemovingADeadNodeRecreatesItsReplicas(t *testing.T) {
	c := newTestCluster(t, 4)
	const parts = 4
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(parts), RequiresDuplicateDetection: proto.Bool(true)})
	var acked []string
	for i := range 20 {
		id := fmt.Sprintf("m%d", i)
		sendOne(t, c.client(0), "q", id)
		acked = append(acked, id)
	}

	// A node that is up with replicas is not removed. Whether a node is
	// up is what the metadata leader has heard of it: wait until it has
	// heard of every node, or it would refuse for another reason.
	await.Until(t, 30*time.Second, "the metadata leader to hear of every node", func() bool {
		for _, n := range c.nodes {
			if n == nil || !n.meta.isLeader() {
				continue
			}
			for i := range c.nodes {
				if !n.heard(c.nodeID(i)) {
					return false
				}
			}
			return true
		}
		return false
	})
	_, err := c.client(0).admin.RemoveNode(context.Background(), &raftbusv1.RemoveNodeRequest{NodeId: "n4"})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || !strings.Contains(err.Error(), "drain it first") {
		t.Fatalf("removing a node that is up: %v", err)
	}

	dir := c.dataDir(3)
	addr := c.stop(3)
	await.Until(t, 30*time.Second, "the removal of n4 to be accepted", func() bool {
		_, err := c.client(1).admin.RemoveNode(context.Background(), &raftbusv1.RemoveNodeRequest{NodeId: "n4"})
		return err == nil
	})
	await.Until(t, moveTimeout, "n4's replicas to be re-created", func() bool { return c.settled(0, "q", 3, "n1", "n2", "n3") })
	c.awaitGroups("q", parts, 0)
	f := c.nodes[0].meta.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 30*time.Second, "n4 to leave the metadata group", func() bool {
		f := c.nodes[0].meta.raft.GetConfiguration()
		return f.Error() == nil && !slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return s.ID == "n4" })
	})
	checkAllThere(t, c.client(1), "q", acked)

	// The removed id is not let in again, whatever its data dir.
	cfg := Config{NodeID: "n4", ListenAddr: "127.0.0.1:0", DataDir: dir + "-new", Join: c.nodes[0].Addr(), Clock: c.clocks[3]}
	if nd, err := Start(cfg); err == nil {
		nd.Close()
		t.Fatal("a removed node joined again")
	} else if !strings.Contains(err.Error(), "removed") || !strings.Contains(err.Error(), "new --node-id") {
		t.Fatalf("refusal of a removed node: %v", err)
	}
	if m := meta.FindNode(snapshotOf(c.nodes[0]), "n4"); m.GetMembership() != raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED {
		t.Fatalf("n4 is %v", m)
	}
	// Nor with its old data: the others tell it, and it stops.
	cfg = Config{NodeID: "n4", ListenAddr: addr, DataDir: dir, Clock: c.clocks[3]}
	nd, err := Start(cfg)
	if err == nil {
		defer closeWithin(t, nd, closeBound)
		select {
		case err = <-nd.Failed():
		case <-time.After(30 * time.Second):
			t.Fatal("a removed node came back with its data and did not stop")
		}
	}
	if !strings.Contains(err.Error(), "removed from the cluster") {
		t.Fatalf("a removed node back with its data stopped with: %v", err)
	}
}

func TestNewNodesGetAShareOfReplicasAndLeaderships(t *testing.T) {
	c := newTestCluster(t, 3)
	const parts = 6
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(parts)})
	s := startSender(t, c.client(0), "q")
	c.start(3, "")
	c.start(4, "")
	all := []string{"n1", "n2", "n3", "n4", "n5"}
	await.Until(t, 3*moveTimeout, "replicas and preferred leaders to spread over five nodes", func() bool {
		if !c.settled(0, "q", 3, all...) {
			return false
		}
		replicas, leads := make(map[string]int), make(map[string]int)
		for _, pl := range c.placements(0, "q") {
			for _, id := range pl.GetNodeIds() {
				replicas[id]++
			}
			leads[pl.GetNodeIds()[0]]++
		}
		for _, id := range all {
			// 18 replicas and 6 leaderships over 5 nodes.
			if replicas[id] < 3 || replicas[id] > 4 || leads[id] > 2 {
				return false
			}
		}
		return true
	})
	c.awaitGroups("q", parts, 0)
	await.Until(t, moveTimeout, "the new nodes to lead partitions", func() bool {
		counts := c.leaderCounts("q", parts)
		return counts[3] > 0 && counts[4] > 0
	})
	await.Until(t, 30*time.Second, "five metadata voters", func() bool {
		f := c.nodes[0].meta.raft.GetConfiguration()
		if f.Error() != nil {
			return false
		}
		voters := 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
		return voters == 5
	})
	checkAllThere(t, c.client(4), "q", s.finish())
}

func snapshotOf(nd *Node) *clusterv1.MetaSnapshot {
	var s *clusterv1.MetaSnapshot
	nd.meta.fsm.View(func(st *clusterv1.MetaSnapshot) { s = proto.Clone(st).(*clusterv1.MetaSnapshot) })
	return s
}
