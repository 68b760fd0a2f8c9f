package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// maxMoves bounds the replica moves under way in the cluster at once: a
// new replica catches up by snapshot and log, and a few at a time leave
// the disks and network to the traffic.
const maxMoves = 2

// Voters of the metadata group: every member up to three, five from five
// members on; the others follow as non-voters. More voters would make
// each metadata change wait for more nodes without surviving more
// failures than the partitions do.
func metaVoterTarget(members int) int {
	if members >= 5 {
		return 5
	}
	return min(members, 3)
}

// heard reports whether this node has heard from node id lately: itself,
// or a peer whose clock it measured recently (every node pings every
// other about once a second).
func (n *Node) heard(id string) bool {
	if id == n.cfg.NodeID {
		return true
	}
	_, ok := n.clocks.monitor.Latest(id, n.clocks.src.Monotonic())
	return ok
}

// placeReplicas makes the placement changes meta.Plan asks for, on the
// metadata leader.
func (n *Node) placeReplicas(ctx context.Context) error {
	// Planned on the state in place, and only the commands copied: a copy
	// of every entity each round was a quarter of an idle node's CPU at
	// 2,000 entities. Plan only reads.
	//
	// Plan is a function of the metadata and of the nodes heard from
	// alone: while neither changed since it last had nothing to do, it
	// has nothing to do still, and is not run (it reads every entity).
	var cmds []*clusterv1.MetaCommand
	changes := n.meta.fsm.Changes()
	n.meta.fsm.View(func(st *clusterv1.MetaSnapshot) {
		var up strings.Builder
		for _, m := range st.Nodes {
			if n.heard(m.NodeId) {
				up.WriteString(m.NodeId)
				up.WriteByte(0)
			}
		}
		if changes == n.planned.changes && up.String() == n.planned.up {
			return
		}
		for _, cmd := range meta.Plan(st, n.heard, maxMoves) {
			cmds = append(cmds, proto.Clone(cmd).(*clusterv1.MetaCommand))
		}
		if len(cmds) == 0 {
			n.planned.changes, n.planned.up = changes, up.String()
		}
	})
	for _, cmd := range cmds {
		if _, err := n.meta.propose(ctx, cmd); err != nil {
			return fmt.Errorf("placement change %v: %w", cmd, err)
		}
		if mv := cmd.GetMoveReplica(); mv != nil {
			n.log.Info("replica move planned", "entity", mv.Entity, "partition", mv.PartitionId, "from", mv.From, "to", mv.To)
		}
	}
	return nil
}

// reconcileVoters keeps the metadata group's voters at metaVoterTarget of
// the members that are not removed, on its leader: removed members leave
// the group, a non-voter that is heard from and active is made a voter
// where one is missing, and a voter beyond the target (draining ones
// first) becomes a non-voter. A leader that is being drained hands the
// group over first.
func (g *metaGroup) reconcileVoters(ctx context.Context) error {
	n := g.n
	f := g.raft.GetConfiguration()
	if err := n.await(ctx, f); err != nil {
		return err
	}
	servers := f.Configuration().Servers
	members := make(map[string]*clusterv1.Node)
	g.fsm.View(func(s *clusterv1.MetaSnapshot) {
		for _, m := range s.Nodes {
			members[m.NodeId] = proto.Clone(m).(*clusterv1.Node)
		}
	})
	membership := func(id raft.ServerID) raftbusv1.NodeMembership { return members[string(id)].GetMembership() }
	var voters, learners []raft.Server
	for _, s := range servers {
		if membership(s.ID) == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED {
			if string(s.ID) == n.cfg.NodeID {
				continue
			}
			n.log.Info("removed node leaves the metadata group", "node", s.ID)
			return n.await(ctx, g.raft.RemoveServer(s.ID, 0, membershipChangeTimeout))
		}
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
		} else {
			learners = append(learners, s)
		}
	}
	if membership(raft.ServerID(n.cfg.NodeID)) != raftbusv1.NodeMembership_NODE_MEMBERSHIP_UNSPECIFIED && len(voters) > 1 {
		n.log.Info("this node is leaving: it hands the metadata group over")
		return n.await(ctx, g.raft.LeadershipTransfer())
	}
	// The target counts active members only: a drained node may be
	// stopped next, and must not hold a vote the group needs. Draining
	// voters count as missing while an active node could vote instead.
	active := func(s raft.Server) bool {
		return membership(s.ID) == raftbusv1.NodeMembership_NODE_MEMBERSHIP_UNSPECIFIED
	}
	activeVoters, activeMembers := 0, 0
	for _, s := range voters {
		if active(s) {
			activeVoters++
			activeMembers++
		}
	}
	for _, s := range learners {
		if active(s) {
			activeMembers++
		}
	}
	target := max(metaVoterTarget(activeMembers), 1)
	if activeVoters < target {
		for _, s := range learners {
			if active(s) && n.heard(string(s.ID)) {
				n.log.Info("metadata group: non-voter made a voter", "node", s.ID)
				return n.await(ctx, g.raft.AddVoter(s.ID, s.Address, 0, membershipChangeTimeout))
			}
		}
	}
	if len(voters) > target {
		// Demote a draining voter first, then one not heard from, never
		// this node.
		slices.SortStableFunc(voters, func(a, b raft.Server) int {
			rank := func(s raft.Server) int {
				switch {
				case !active(s):
					return 0
				case !n.heard(string(s.ID)):
					return 1
				}
				return 2
			}
			return rank(a) - rank(b)
		})
		for _, s := range voters {
			if string(s.ID) != n.cfg.NodeID {
				n.log.Info("metadata group: voter made a non-voter", "node", s.ID)
				return n.await(ctx, g.raft.DemoteVoter(s.ID, 0, membershipChangeTimeout))
			}
		}
	}
	return nil
}

// membershipChangeTimeout bounds how long a configuration change of the
// metadata group waits to enter Raft.
const membershipChangeTimeout = 10 * time.Second

// changeMembership drains a node, takes it back, or removes it, on the
// metadata leader, after checking that the cluster can afford it.
func (n *Node) changeMembership(ctx context.Context, id string, want raftbusv1.NodeMembership) error {
	// The checks read the metadata: a leader just elected may not have
	// applied everything committed before it yet.
	if err := n.meta.confirmLeadership(ctx); err != nil {
		return err
	}
	var s *clusterv1.MetaSnapshot
	n.meta.fsm.View(func(st *clusterv1.MetaSnapshot) { s = proto.Clone(st).(*clusterv1.MetaSnapshot) })
	m := meta.FindNode(s, id)
	switch {
	case m == nil:
		return apierror.NotFound("node %q is not a member of the cluster", id)
	case m.GetMembership() == want:
		return nil
	case m.GetMembership() == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED:
		return apierror.Invalid("%s", meta.RemovedMessage(id))
	}
	held := 0
	for _, e := range s.Entities {
		for _, pl := range e.Partitions {
			if meta.Holds(pl, id) {
				held++
			}
		}
	}
	switch want {
	case raftbusv1.NodeMembership_NODE_MEMBERSHIP_DRAINING:
		active := 0
		for _, o := range s.Nodes {
			if o.NodeId != id && meta.Active(o) {
				active++
			}
		}
		if held > 0 && active < meta.ReplicationFactor {
			return apierror.Invalid("draining node %s would leave %d active nodes for partitions of %d replicas: add a node first (or remove %s if it is gone for good)",
				id, active, meta.ReplicationFactor, id)
		}
	case raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED:
		if err := n.checkRemoval(s, id, held); err != nil {
			return err
		}
	}
	_, err := n.meta.propose(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_SetNodeMembership{SetNodeMembership: &clusterv1.SetNodeMembership{
		NodeId: id, Membership: want,
	}}})
	if err == nil {
		n.log.Info("node membership changed", "node", id, "membership", want)
	}
	return err
}

// checkRemoval refuses to remove a node that is still up with replicas
// (drain it first), the metadata leader itself, or a node without which
// a partition or the metadata group could not change its configuration:
// re-creating a lost replica needs a quorum of the others.
func (n *Node) checkRemoval(s *clusterv1.MetaSnapshot, id string, held int) error {
	if id == n.cfg.NodeID {
		return apierror.Invalid("node %s leads the metadata group and is up: drain it (raftbus node drain %s), stop it, then remove it from another node", id, id)
	}
	if held > 0 && n.heard(id) {
		return apierror.Invalid("node %s is up and holds %d partition replicas: drain it first (raftbus node drain %s), or stop it if it is gone for good", id, held, id)
	}
	var lost []string
	for _, e := range s.Entities {
		for pid, pl := range e.Partitions {
			if !meta.Holds(pl, id) {
				continue
			}
			group := slices.Clone(pl.NodeIds)
			if from := pl.GetMove().GetFrom(); from != "" {
				group = append(group, from)
			}
			up := 0
			for _, o := range group {
				if o != id && n.heard(o) {
					up++
				}
			}
			if up < len(group)/2+1 {
				lost = append(lost, fmt.Sprintf("%s/%d (%d of %d replicas up)", e.Name, pid, up, len(group)))
			}
		}
	}
	if len(lost) > 0 {
		if len(lost) > 5 {
			lost = append(lost[:5], fmt.Sprintf("and %d more", len(lost)-5))
		}
		return apierror.Invalid("removing node %s now would leave partitions without a quorum to re-create its replicas: %s; bring their other nodes back first",
			id, strings.Join(lost, ", "))
	}
	return nil
}
