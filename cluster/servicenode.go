package cluster

import (
	"context"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/cluster/service"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// MaxPartitions is the most partitions an entity may have.
const MaxPartitions = service.MaxPartitions

// An answer of twice service.MaxReceiveBytes fits in a gRPC message with
// room to spare: this does not compile (it overflows uint) otherwise.
const _ = uint(MaxMessageBytes/4 - 2*service.MaxReceiveBytes)

// serviceNode is the node as its public services see it.
type serviceNode struct{ *Node }

var _ service.Node = serviceNode{}

func (s serviceNode) Entity(ctx context.Context, name string) (*clusterv1.Entity, error) {
	return s.entity(ctx, name)
}

func (s serviceNode) Subscription(ctx context.Context, topic, name string) (*clusterv1.Entity, *clusterv1.Subscription, error) {
	return s.subscription(ctx, topic, name)
}

func (s serviceNode) View(fn func(*clusterv1.MetaSnapshot)) { s.meta.fsm.View(fn) }

func (s serviceNode) NodeAddrs() map[string]string { return s.nodeAddrs() }

func (s serviceNode) AtMetaLeader(ctx context.Context, read bool, local func() error, remote func(ctx context.Context, conn grpc.ClientConnInterface) error) error {
	return s.atMetaLeader(ctx, read, local, remote)
}

func (s serviceNode) Commit(ctx context.Context, cmd *clusterv1.MetaCommand) (*clusterv1.MetaResult, error) {
	switch cmd.GetBody().(type) {
	case *clusterv1.MetaCommand_PutQueue, *clusterv1.MetaCommand_PutTopic:
		// An entity's partitions are placed on members: every voter of
		// the metadata group must be one first.
		if err := s.meta.ensureMembers(ctx); err != nil {
			return nil, err
		}
	}
	res, err := s.meta.propose(ctx, cmd)
	if err == nil && placesPartitions(cmd) {
		s.meta.announceCommit()
	}
	return res, err
}

// placesPartitions reports whether cmd may create partitions, whose
// replicas the other members open when they learn of the commit.
func placesPartitions(cmd *clusterv1.MetaCommand) bool {
	switch b := cmd.GetBody().(type) {
	case *clusterv1.MetaCommand_PutQueue:
		return b.PutQueue.GetCreate()
	case *clusterv1.MetaCommand_PutTopic:
		return b.PutTopic.GetCreate()
	}
	return false
}

func (s serviceNode) Route(ctx context.Context, e *clusterv1.Entity, id uint32, rep routing.Repeat,
	local func(r service.Replica) error, remote func(ctx context.Context, conn grpc.ClientConnInterface) error,
) error {
	return s.route(ctx, e, id, rep, func(r *replica) error { return local(replicaHandle{r.p, r}) }, remote)
}

func (s serviceNode) Replica(e *clusterv1.Entity, id uint32) service.Replica {
	r := s.replica(e, id)
	if r == nil {
		return nil
	}
	return replicaHandle{r.p, r}
}

func (s serviceNode) Call(ctx context.Context, addr string, call func(ctx context.Context, conn grpc.ClientConnInterface) error) error {
	return s.peers.Call(ctx, addr, call)
}

func (s serviceNode) Views(ctx context.Context, e *clusterv1.Entity) []service.PartitionView {
	views := s.viewPartitions(ctx, e)
	out := make([]service.PartitionView, len(views))
	for id, v := range views {
		out[id] = service.PartitionView{LeaderID: v.leaderID, LeaderAddr: v.leaderAddr, Configured: v.configured}
	}
	return out
}

func (s serviceNode) Stopping() <-chan struct{} { return s.stop }

func (s serviceNode) ChangeMembership(ctx context.Context, nodeID string, m raftbusv1.NodeMembership) error {
	return s.changeMembership(ctx, nodeID, m)
}

func (s serviceNode) ClusterInfo(ctx context.Context) (*raftbusv1.GetClusterInfoResponse, error) {
	return s.clusterInfo(ctx)
}

// replicaHandle is one of this node's replicas as the services see it:
// its partition, and whether its engine has the entity yet.
type replicaHandle struct {
	*partition.Partition
	r *replica
}

func (h replicaHandle) Ready() bool { return h.r.ready() }
