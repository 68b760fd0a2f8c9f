package identity

import (
	"fmt"

	"google.golang.org/grpc/metadata"
)

// The gRPC metadata keys of a call between nodes: who makes it, and the
// incarnation the caller's cluster knows the callee by.
const (
	ClusterIDKey         = "raftbus-cluster-id"
	NodeIDKey            = "raftbus-node-id"
	IncarnationKey       = "raftbus-incarnation"
	TargetIncarnationKey = "raftbus-target-incarnation"
)

// Identity is one node incarnation in one cluster. Empty fields are not
// known (yet).
type Identity struct {
	ClusterID   string
	NodeID      string
	Incarnation string
}

// Outgoing is the metadata of a call from self to a node whose
// incarnation the caller's membership records as target ("" when it
// records none).
func Outgoing(self Identity, target string) metadata.MD {
	md := metadata.MD{}
	set := func(k, v string) {
		if v != "" {
			md.Set(k, v)
		}
	}
	set(ClusterIDKey, self.ClusterID)
	set(NodeIDKey, self.NodeID)
	set(IncarnationKey, self.Incarnation)
	set(TargetIncarnationKey, target)
	return md
}

// Caller reads who makes a call from its incoming metadata, and the
// incarnation it means to reach. A node that predates identities sends
// none: every field is empty.
func Caller(md metadata.MD) (caller Identity, target string) {
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return Identity{ClusterID: get(ClusterIDKey), NodeID: get(NodeIDKey), Incarnation: get(IncarnationKey)}, get(TargetIncarnationKey)
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
)

// Refusal is a call refused for who made it or whom it reached.
type Refusal struct {
	Kind    Kind
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Check decides whether self may serve a call from caller that means to
// reach target (the incarnation the caller's cluster knows self by, ""
// when none). recorded is the incarnation self's committed membership
// records for the caller's node id ("" when none). Whatever is not known
// on either side passes: a node of a cluster still forming, or one that
// predates identities, is not refused for what it cannot say.
func Check(self, caller Identity, recorded, target string) *Refusal {
	if caller.ClusterID != "" && self.ClusterID != "" && caller.ClusterID != self.ClusterID {
		return &Refusal{Kind: ForeignCluster, Message: fmt.Sprintf(
			"node %s belongs to cluster %s and this node %s to cluster %s: a node takes part only in its own cluster; check the --peers and --join addresses and that each node has its own cluster's data dir",
			caller.NodeID, caller.ClusterID, self.NodeID, self.ClusterID)}
	}
	if target != "" && self.Incarnation != "" && target != self.Incarnation {
		return &Refusal{Kind: StaleSelf, Message: StaleMessage(self.NodeID, target, self.Incarnation)}
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
