package identity

import (
	"fmt"

	"google.golang.org/grpc/metadata"
)

// The gRPC metadata keys of a call between nodes: who makes it, and the
// node it means to reach with the incarnation the caller's cluster knows
// it by.
const (
	ClusterIDKey         = "raftbus-cluster-id"
	NodeIDKey            = "raftbus-node-id"
	IncarnationKey       = "raftbus-incarnation"
	TargetNodeIDKey      = "raftbus-target-node-id"
	TargetIncarnationKey = "raftbus-target-incarnation"
)

// Identity is one node incarnation in one cluster. Empty fields are not
// known (yet).
type Identity struct {
	ClusterID   string
	NodeID      string
	Incarnation string
}

// Outgoing is the metadata of a call from self to the node target: its id
// and the incarnation the caller's membership records for it (each ""
// when not known).
func Outgoing(self Identity, target Identity) metadata.MD {
	md := metadata.MD{}
	set := func(k, v string) {
		if v != "" {
			md.Set(k, v)
		}
	}
	set(ClusterIDKey, self.ClusterID)
	set(NodeIDKey, self.NodeID)
	set(IncarnationKey, self.Incarnation)
	set(TargetNodeIDKey, target.NodeID)
	set(TargetIncarnationKey, target.Incarnation)
	return md
}

// Caller reads who makes a call from its incoming metadata, and the node
// and incarnation it means to reach. A node that predates identities
// sends none: every field is empty.
func Caller(md metadata.MD) (caller, target Identity) {
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return Identity{ClusterID: get(ClusterIDKey), NodeID: get(NodeIDKey), Incarnation: get(IncarnationKey)},
		Identity{NodeID: get(TargetNodeIDKey), Incarnation: get(TargetIncarnationKey)}
}

// Kind is why a call between nodes is refused.
type Kind int

const (
	// ForeignCluster: caller and callee belong to different clusters.
	ForeignCluster Kind = iota + 1
	// StaleCaller: the cluster knows the caller's node id with another
	// incarnation; the caller's data dir was wiped or replaced.
	StaleCaller
	// StaleSelf: the caller knows this node's id with another incarnation;
	// this node's data dir was wiped or replaced. It must stop.
	StaleSelf
	// WrongNode: the call was meant for another node that had this node's
	// address (a node replaced by a new one on the same machine).
	WrongNode
)

// Refusal is a call refused for who made it or whom it reached.
type Refusal struct {
	Kind    Kind
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Check decides whether self may serve a call from caller that means to
// reach target (the node, and the incarnation the caller's cluster knows
// it by; "" when not known). recorded is the incarnation self's committed membership
// records for the caller's node id ("" when none). Whatever is not known
// on either side passes: a node of a cluster still forming, or one that
// predates identities, is not refused for what it cannot say.
func Check(self, caller Identity, recorded string, target Identity) *Refusal {
	if caller.ClusterID != "" && self.ClusterID != "" && caller.ClusterID != self.ClusterID {
		return &Refusal{Kind: ForeignCluster, Message: fmt.Sprintf(
			"node %s belongs to cluster %s and this node %s to cluster %s: a node takes part only in its own cluster; check the --peers and --join addresses and that each node has its own cluster's data dir",
			caller.NodeID, caller.ClusterID, self.NodeID, self.ClusterID)}
	}
	if target.NodeID != "" && self.NodeID != "" && target.NodeID != self.NodeID {
		return &Refusal{Kind: WrongNode, Message: fmt.Sprintf(
			"node %s called node %s at this address, which is node %s's: the cluster's membership must catch up with the address change",
			caller.NodeID, target.NodeID, self.NodeID)}
	}
	if target.Incarnation != "" && self.Incarnation != "" && target.Incarnation != self.Incarnation {
		return &Refusal{Kind: StaleSelf, Message: StaleMessage(self.NodeID, target.Incarnation, self.Incarnation)}
	}
	if caller.Incarnation != "" && recorded != "" && caller.Incarnation != recorded {
		return &Refusal{Kind: StaleCaller, Message: fmt.Sprintf(
			"refused node %s: it presents data dir incarnation %s but the cluster knows %s as incarnation %s, so its data dir was wiped or replaced and it must not vote or take part with a blank state; remove node %s and join under a new id, or restore its data dir",
			caller.NodeID, caller.Incarnation, caller.NodeID, recorded, caller.NodeID)}
	}
	return nil
}

// StaleMessage is what a node whose data dir is not the one its cluster
// knows says before it stops.
func StaleMessage(nodeID, known, mine string) string {
	return fmt.Sprintf(
		"node %s is refused: the cluster knows %s by data dir incarnation %s, but this data dir is incarnation %s, so it was wiped or replaced; a node with a blank data dir must not vote or take part under an old id. Remove node %s and join under a new id, or restore its data dir",
		nodeID, nodeID, known, mine, nodeID)
}
