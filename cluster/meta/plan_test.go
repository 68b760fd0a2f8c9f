package meta

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// cluster is a metadata state driven the way the metadata leader and the
// partition leaders drive it: Plan's commands applied, and every move
// finished as a partition leader would report it.
type cluster struct {
	t     *testing.T
	s     *clusterv1.MetaSnapshot
	index uint64
	down  map[string]bool
}

func newCluster(t *testing.T, nodes int) *cluster {
	c := &cluster{t: t, s: &clusterv1.MetaSnapshot{}, down: make(map[string]bool)}
	for i := 1; i <= nodes; i++ {
		c.must(addNode(fmt.Sprintf("n%d", i)))
	}
	return c
}

func (c *cluster) apply(cmd *clusterv1.MetaCommand) *clusterv1.MetaResult {
	c.index++
	return apply(c.s, cmd, c.index)
}

func (c *cluster) must(cmd *clusterv1.MetaCommand) {
	c.t.Helper()
	if res := c.apply(cmd); res.GetErrorReason() != 0 {
		c.t.Fatalf("%v: %s", cmd, res.GetErrorMessage())
	}
}

func (c *cluster) setMembership(id string, m raftbusv1.NodeMembership) {
	c.t.Helper()
	c.must(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_SetNodeMembership{SetNodeMembership: &clusterv1.SetNodeMembership{NodeId: id, Membership: m}}})
}

func (c *cluster) up(id string) bool { return !c.down[id] }

// converge plans and applies until nothing is left to do, finishing the
// moves under way after each round, and returns the rounds it took.
func (c *cluster) converge(maxMoves int) int {
	c.t.Helper()
	for round := 1; round < 1000; round++ {
		cmds := Plan(c.s, c.up, maxMoves)
		if again := Plan(c.s, c.up, maxMoves); !slices.EqualFunc(cmds, again, func(a, b *clusterv1.MetaCommand) bool { return proto.Equal(a, b) }) {
			c.t.Fatalf("Plan is not deterministic: %v, then %v", cmds, again)
		}
		for _, cmd := range cmds {
			c.must(cmd)
		}
		var moving []*clusterv1.FinishMove
		for _, e := range c.s.Entities {
			for i, pl := range e.Partitions {
				if mv := pl.GetMove(); mv != nil {
					moving = append(moving, &clusterv1.FinishMove{Entity: e.Name, Incarnation: e.Incarnation, PartitionId: uint32(i), From: mv.From, To: mv.To})
				}
			}
		}
		if len(moving) > maxMoves {
			c.t.Fatalf("round %d: %d moves under way, at most %d allowed", round, len(moving), maxMoves)
		}
		if len(cmds) == 0 && len(moving) == 0 {
			return round
		}
		for _, f := range moving {
			c.must(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_FinishMove{FinishMove: f}})
		}
	}
	c.t.Fatal("placement never settled")
	return 0
}

// counts are the replicas and preferred leaderships per node.
func (c *cluster) counts() (replicas, leads map[string]int) {
	replicas, leads = make(map[string]int), make(map[string]int)
	for _, e := range c.s.Entities {
		for _, pl := range e.Partitions {
			for _, id := range pl.NodeIds {
				replicas[id]++
			}
			leads[pl.NodeIds[0]]++
		}
	}
	return replicas, leads
}

// checkReplicas asserts every partition has want distinct replicas, none
// on a node outside allowed.
func (c *cluster) checkReplicas(want int, allowed ...string) {
	c.t.Helper()
	for _, e := range c.s.Entities {
		for i, pl := range e.Partitions {
			ids := slices.Clone(pl.NodeIds)
			slices.Sort(ids)
			if len(slices.Compact(ids)) != want || len(pl.NodeIds) != want {
				c.t.Errorf("%s/%d: replicas %v, want %d distinct", e.Name, i, pl.NodeIds, want)
			}
			for _, id := range pl.NodeIds {
				if !slices.Contains(allowed, id) {
					c.t.Errorf("%s/%d: replica on %s, only %v allowed", e.Name, i, id, allowed)
				}
			}
		}
	}
}

func spread(t *testing.T, what string, m map[string]int, nodes ...string) {
	t.Helper()
	lo, hi := m[nodes[0]], m[nodes[0]]
	for _, id := range nodes {
		lo, hi = min(lo, m[id]), max(hi, m[id])
	}
	if hi-lo > 1 {
		t.Errorf("%s per node %v: spread %d..%d, want within one", what, m, lo, hi)
	}
}

func TestPlanDrainMovesLeadershipFirstThenEveryReplica(t *testing.T) {
	c := newCluster(t, 4)
	c.must(putQueueCmd("q", 8, true))
	c.setMembership("n1", raftbusv1.NodeMembership_NODE_MEMBERSHIP_DRAINING)

	cmds := Plan(c.s, c.up, 2)
	moves := 0
	for _, cmd := range cmds {
		if cmd.GetMoveReplica() != nil {
			moves++
			if cmd.GetMoveReplica().GetFrom() != "n1" {
				t.Errorf("first round moves %v, want only replicas of n1", cmd)
			}
		}
	}
	if moves != 2 {
		t.Errorf("first round: %d moves, want 2 (the bound)", moves)
	}
	for _, cmd := range cmds {
		c.must(cmd)
	}
	for _, e := range c.s.Entities {
		for i, pl := range e.Partitions {
			if pl.NodeIds[0] == "n1" {
				t.Errorf("%s/%d still prefers the draining node: %v", e.Name, i, pl.NodeIds)
			}
		}
	}

	c.converge(2)
	c.checkReplicas(3, "n2", "n3", "n4")
	replicas, leads := c.counts()
	spread(t, "replicas", replicas, "n2", "n3", "n4")
	spread(t, "leaderships", leads, "n2", "n3", "n4")
}

func TestPlanRemovalWithNowhereToGoDropsTheReplica(t *testing.T) {
	c := newCluster(t, 3)
	c.must(putQueueCmd("q", 4, true))
	c.down["n3"] = true
	c.setMembership("n3", raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED)
	c.converge(2)
	c.checkReplicas(2, "n1", "n2")

	// A new node brings the partitions back to three replicas.
	c.must(addNode("n4"))
	c.converge(2)
	c.checkReplicas(3, "n1", "n2", "n4")
}

func TestPlanNewNodesGetAFairShare(t *testing.T) {
	c := newCluster(t, 3)
	c.must(putQueueCmd("a", 8, true))
	c.must(putQueueCmd("b", 4, true))
	c.must(addNode("n4"))
	c.must(addNode("n5"))
	c.converge(2)
	c.checkReplicas(3, "n1", "n2", "n3", "n4", "n5")
	replicas, leads := c.counts()
	spread(t, "replicas", replicas, "n1", "n2", "n3", "n4", "n5")
	spread(t, "leaderships", leads, "n1", "n2", "n3", "n4", "n5")
	if replicas["n4"] == 0 || replicas["n5"] == 0 {
		t.Errorf("replicas per node %v: the new nodes got none", replicas)
	}
}

func TestPlanGrowsPartitionsCreatedOnFewerNodes(t *testing.T) {
	c := newCluster(t, 1)
	c.must(putQueueCmd("q", 2, true))
	c.checkReplicas(1, "n1")
	c.must(addNode("n2"))
	c.must(addNode("n3"))
	c.converge(1)
	c.checkReplicas(3, "n1", "n2", "n3")
	for _, pl := range c.s.Entities[0].Partitions {
		if !slices.Equal(Bootstrap(pl, "n1"), []string{"n1"}) {
			t.Errorf("placement %v: n1 bootstraps with %v, want the founders [n1]", pl, Bootstrap(pl, "n1"))
		}
		for _, id := range []string{"n2", "n3"} {
			if b := Bootstrap(pl, id); b != nil {
				t.Errorf("placement %v: added node %s bootstraps with %v", pl, id, b)
			}
		}
	}
}

func TestPlanNeverMovesToANodeItDoesNotHear(t *testing.T) {
	c := newCluster(t, 4)
	c.must(putQueueCmd("q", 4, true))
	c.down["n4"] = true
	c.setMembership("n1", raftbusv1.NodeMembership_NODE_MEMBERSHIP_DRAINING)
	for _, cmd := range Plan(c.s, c.up, 4) {
		if cmd.GetMoveReplica().GetTo() == "n4" {
			t.Errorf("planned %v to a node that is down", cmd)
		}
	}
}

func TestMoveCommandsCheckTheState(t *testing.T) {
	c := newCluster(t, 4)
	c.must(putQueueCmd("q", 1, true))
	pl := c.s.Entities[0].Partitions[0]
	inc := c.s.Entities[0].Incarnation
	outside := "n1"
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		if !slices.Contains(pl.NodeIds, id) {
			outside = id
		}
	}
	move := func(from, to string, incarnation uint64) *clusterv1.MetaResult {
		return c.apply(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_MoveReplica{MoveReplica: &clusterv1.MoveReplica{
			Entity: "q", Incarnation: incarnation, From: from, To: to}}})
	}
	for name, tc := range map[string]struct {
		res  *clusterv1.MetaResult
		want raftbusv1.ErrorReason
	}{
		"stale incarnation": {move(pl.NodeIds[0], outside, inc+1), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND},
		"from a non-holder": {move(outside, pl.NodeIds[0], inc), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		"to a holder":       {move(pl.NodeIds[0], pl.NodeIds[1], inc), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		"to an unknown":     {move(pl.NodeIds[0], "n9", inc), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
	} {
		if tc.res.GetErrorReason() != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.res, tc.want)
		}
	}
	first := pl.NodeIds[0]
	if res := move(first, outside, inc); res.GetErrorReason() != 0 {
		t.Fatal(res)
	}
	if pl.NodeIds[0] != outside || !proto.Equal(pl.Move, &clusterv1.ReplicaMove{From: first, To: outside}) {
		t.Errorf("after the move: %v", pl)
	}
	if !Holds(pl, first) || !Holds(pl, outside) {
		t.Errorf("both ends of a move under way hold the replica: %v", pl)
	}
	if res := move(pl.NodeIds[1], first, inc); res.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Errorf("a second move while one is under way: %v", res)
	}
	c.must(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_FinishMove{FinishMove: &clusterv1.FinishMove{Entity: "q", Incarnation: inc, From: first, To: outside}}})
	if pl.Move != nil || Holds(pl, first) {
		t.Errorf("after the move finished: %v", pl)
	}

	// A removed node stays removed and is not let in again.
	c.setMembership("n2", raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED)
	if res := c.apply(addNode("n2")); res.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Errorf("a removed node joining again: %v", res)
	}
	res := c.apply(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_SetNodeMembership{SetNodeMembership: &clusterv1.SetNodeMembership{NodeId: "n2"}}})
	if res.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Errorf("a removed node made active again: %v", res)
	}
}

func TestPlanRedirectsAMoveToANodeRemovedMidway(t *testing.T) {
	c := newCluster(t, 5)
	c.must(putQueueCmd("q", 1, true))
	pl := c.s.Entities[0].Partitions[0]
	var outside []string
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if !slices.Contains(pl.NodeIds, id) {
			outside = append(outside, id)
		}
	}
	from, to := pl.NodeIds[1], outside[0]
	c.must(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_MoveReplica{MoveReplica: &clusterv1.MoveReplica{
		Entity: "q", Incarnation: c.s.Entities[0].Incarnation, From: from, To: to}}})
	c.down[to] = true
	c.setMembership(to, raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED)

	cmds := Plan(c.s, c.up, 2)
	if len(cmds) != 1 || cmds[0].GetRedirectMove().GetTo() != outside[1] {
		t.Fatalf("plan %v, want the move redirected to %s", cmds, outside[1])
	}
	c.converge(2)
	c.checkReplicas(3, "n1", "n2", "n3", "n4", "n5")
	if slices.Contains(pl.NodeIds, to) || slices.Contains(pl.NodeIds, from) || Bootstrap(pl, outside[1]) != nil {
		t.Errorf("after the redirect: %v", pl)
	}
}

func TestPlanRecreatesAReplicaOfARemovedNodeBeforeDraining(t *testing.T) {
	c := newCluster(t, 5)
	c.must(putQueueCmd("q", 5, true))
	c.setMembership("n1", raftbusv1.NodeMembership_NODE_MEMBERSHIP_DRAINING)
	c.down["n2"] = true
	c.setMembership("n2", raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED)
	for round := 0; ; round++ {
		var froms []string
		for _, cmd := range Plan(c.s, c.up, 1) {
			if mv := cmd.GetMoveReplica(); mv != nil {
				froms = append(froms, mv.GetFrom())
			}
			c.must(cmd)
		}
		replicas, _ := c.counts()
		if replicas["n2"] > 0 && (len(froms) != 1 || froms[0] != "n2") {
			t.Fatalf("round %d moved %v while n2, removed, still holds %d replicas", round, froms, replicas["n2"])
		}
		if replicas["n2"] == 0 {
			break
		}
		for _, e := range c.s.Entities {
			for i, pl := range e.Partitions {
				if mv := pl.GetMove(); mv != nil {
					c.must(&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_FinishMove{FinishMove: &clusterv1.FinishMove{Entity: e.Name, Incarnation: e.Incarnation, PartitionId: uint32(i), From: mv.From, To: mv.To}}})
				}
			}
		}
	}
	c.converge(1)
	c.checkReplicas(3, "n3", "n4", "n5")
}
