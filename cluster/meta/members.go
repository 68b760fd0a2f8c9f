package meta

import (
	"slices"
	"strings"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Membership changes and replica moves. The state machine only records
// decisions and checks that they fit the state; the metadata leader makes
// them (see Plan) and partition leaders carry them out in their groups.

// FindNode returns the member of that id, or nil.
func FindNode(s *clusterv1.MetaSnapshot, id string) *clusterv1.Node {
	i, found := nodeIndex(s, id)
	if !found {
		return nil
	}
	return s.Nodes[i]
}

func nodeIndex(s *clusterv1.MetaSnapshot, id string) (int, bool) {
	return slices.BinarySearchFunc(s.Nodes, id, func(x *clusterv1.Node, id string) int { return strings.Compare(x.NodeId, id) })
}

// Active reports whether partitions may be placed on the member.
func Active(m *clusterv1.Node) bool {
	return m.GetMembership() == raftbusv1.NodeMembership_NODE_MEMBERSHIP_UNSPECIFIED
}

// RemovedMessage is why a removed node may not come back under its id.
func RemovedMessage(id string) string {
	return "node " + id + " was removed from the cluster for good: a node that comes back must use a new --node-id and an empty data dir"
}

func setNodeMembership(s *clusterv1.MetaSnapshot, c *clusterv1.SetNodeMembership) *clusterv1.MetaResult {
	m := FindNode(s, c.GetNodeId())
	if m == nil {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "node %q is not a member", c.GetNodeId())
	}
	if m.Membership == c.GetMembership() {
		return &clusterv1.MetaResult{}
	}
	if m.Membership == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "%s", RemovedMessage(m.NodeId))
	}
	m.Membership = c.GetMembership()
	return &clusterv1.MetaResult{}
}

// placementOf finds a partition's placement by entity, incarnation and
// partition id: a command made for an entity since deleted (or deleted
// and created again) finds nothing.
func placementOf(s *clusterv1.MetaSnapshot, entity string, incarnation uint64, id uint32) (*clusterv1.Placement, *clusterv1.MetaResult) {
	e := FindEntity(s, entity)
	if e == nil || e.GetIncarnation() != incarnation || int(id) >= len(e.GetPartitions()) {
		return nil, failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "partition %d of %q (incarnation %d) does not exist", id, entity, incarnation)
	}
	return e.Partitions[id], nil
}

func moveReplica(s *clusterv1.MetaSnapshot, c *clusterv1.MoveReplica) *clusterv1.MetaResult {
	pl, fail := placementOf(s, c.GetEntity(), c.GetIncarnation(), c.GetPartitionId())
	if fail != nil {
		return fail
	}
	from, to := c.GetFrom(), c.GetTo()
	switch {
	case pl.GetMove() != nil:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, "partition %d of %q is moving a replica already", c.GetPartitionId(), c.GetEntity())
	case from == "" && to == "":
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "a move needs a node to move from or to")
	case from != "" && !slices.Contains(pl.NodeIds, from):
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "node %s holds no replica of partition %d of %q", from, c.GetPartitionId(), c.GetEntity())
	case to != "" && slices.Contains(pl.NodeIds, to):
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "node %s holds a replica of partition %d of %q already", to, c.GetPartitionId(), c.GetEntity())
	case to != "" && (FindNode(s, to) == nil || !Active(FindNode(s, to))):
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "node %s is not an active member", to)
	case to == "" && len(pl.NodeIds) == 1:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "partition %d of %q has no other replica", c.GetPartitionId(), c.GetEntity())
	}
	if len(pl.FounderNodeIds) == 0 {
		pl.FounderNodeIds = slices.Clone(pl.NodeIds)
	}
	switch {
	case from == "":
		pl.NodeIds = append(pl.NodeIds, to)
	case to == "":
		pl.NodeIds = slices.DeleteFunc(pl.NodeIds, func(id string) bool { return id == from })
	default:
		pl.NodeIds[slices.Index(pl.NodeIds, from)] = to
	}
	pl.AddedNodeIds = slices.DeleteFunc(pl.AddedNodeIds, func(id string) bool { return id == from })
	if to != "" && !slices.Contains(pl.AddedNodeIds, to) {
		pl.AddedNodeIds = append(pl.AddedNodeIds, to)
	}
	pl.Move = &clusterv1.ReplicaMove{From: from, To: to}
	return &clusterv1.MetaResult{}
}

func redirectMove(s *clusterv1.MetaSnapshot, c *clusterv1.RedirectMove) *clusterv1.MetaResult {
	pl, fail := placementOf(s, c.GetEntity(), c.GetIncarnation(), c.GetPartitionId())
	if fail != nil {
		return fail
	}
	mv, to := pl.GetMove(), c.GetTo()
	switch {
	case mv == nil || mv.GetTo() == "":
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "partition %d of %q is not moving a replica to a node", c.GetPartitionId(), c.GetEntity())
	case to != "" && (slices.Contains(pl.NodeIds, to) || to == mv.GetFrom()):
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "node %s holds a replica of partition %d of %q already", to, c.GetPartitionId(), c.GetEntity())
	case to != "" && (FindNode(s, to) == nil || !Active(FindNode(s, to))):
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "node %s is not an active member", to)
	}
	old := mv.GetTo()
	i := slices.Index(pl.NodeIds, old)
	if to == "" {
		pl.NodeIds = slices.Delete(pl.NodeIds, i, i+1)
	} else {
		pl.NodeIds[i] = to
		pl.AddedNodeIds = append(pl.AddedNodeIds, to)
	}
	pl.AddedNodeIds = slices.DeleteFunc(pl.AddedNodeIds, func(id string) bool { return id == old })
	mv.To = to
	return &clusterv1.MetaResult{}
}

func finishMove(s *clusterv1.MetaSnapshot, c *clusterv1.FinishMove) *clusterv1.MetaResult {
	pl, fail := placementOf(s, c.GetEntity(), c.GetIncarnation(), c.GetPartitionId())
	if fail != nil {
		return fail
	}
	mv := pl.GetMove()
	if mv == nil || mv.GetFrom() != c.GetFrom() || mv.GetTo() != c.GetTo() {
		// Reported twice (a leader change in between): done already.
		return &clusterv1.MetaResult{}
	}
	pl.Move = nil
	return &clusterv1.MetaResult{}
}

func setPreferredLeader(s *clusterv1.MetaSnapshot, c *clusterv1.SetPreferredLeader) *clusterv1.MetaResult {
	pl, fail := placementOf(s, c.GetEntity(), c.GetIncarnation(), c.GetPartitionId())
	if fail != nil {
		return fail
	}
	i := slices.Index(pl.NodeIds, c.GetNodeId())
	if i < 0 {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "node %s holds no replica of partition %d of %q", c.GetNodeId(), c.GetPartitionId(), c.GetEntity())
	}
	pl.NodeIds = slices.Insert(slices.Delete(pl.NodeIds, i, i+1), 0, c.GetNodeId())
	return &clusterv1.MetaResult{}
}

// Bootstrap tells how node id starts its replica of a partition: with
// the configuration it returns when it is one of the partition's founders
// (nil otherwise: it waits for the leader to add it).
func Bootstrap(pl *clusterv1.Placement, id string) []string {
	if slices.Contains(pl.GetAddedNodeIds(), id) {
		return nil
	}
	founders := pl.GetFounderNodeIds()
	if len(founders) == 0 {
		founders = pl.GetNodeIds()
	}
	if !slices.Contains(founders, id) {
		return nil
	}
	return founders
}

// Holds reports whether node id keeps a replica of the partition: placed
// there, or moving off it.
func Holds(pl *clusterv1.Placement, id string) bool {
	return slices.Contains(pl.GetNodeIds(), id) || pl.GetMove().GetFrom() == id
}
