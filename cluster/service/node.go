package service

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Node is what the services need of the node they run on.
type Node interface {
	Metadata
	Partitions
	// ClusterInfo is what the node knows of the cluster: its members,
	// their clocks and logs, and every partition's replicas.
	ClusterInfo(ctx context.Context) (*raftbusv1.GetClusterInfoResponse, error)
	// ChangeMembership drains a member, makes it active again or removes
	// it, after checking the cluster can afford it; only at the metadata
	// leader.
	ChangeMembership(ctx context.Context, nodeID string, m raftbusv1.NodeMembership) error
}

// Metadata is the node's metadata group as the services read and change
// it.
type Metadata interface {
	// Entity is the committed definition of the queue or topic name from
	// this node's copy of the metadata, once that copy holds every change
	// acknowledged before the call (read-your-writes); NOT_FOUND when
	// there is none. It must not be modified.
	Entity(ctx context.Context, name string) (*clusterv1.Entity, error)
	// Subscription is a subscription and its topic, likewise.
	Subscription(ctx context.Context, topic, name string) (*clusterv1.Entity, *clusterv1.Subscription, error)
	// View calls fn with this node's copy of the metadata as it stands.
	// fn must not keep or modify it.
	View(fn func(*clusterv1.MetaSnapshot))
	// NodeAddrs maps the members' ids to their addresses.
	NodeAddrs() map[string]string
	// AtMetaLeader runs local at the leader of the metadata group (this
	// node, or the one remote sends the call to). For a read, the leader
	// first confirms that it still leads with every acknowledged change
	// applied, so that a deposed leader never answers from stale state.
	AtMetaLeader(ctx context.Context, read bool, local func() error, remote func(ctx context.Context, conn grpc.ClientConnInterface) error) error
	// Commit commits a change of the metadata; only at its leader.
	Commit(ctx context.Context, cmd *clusterv1.MetaCommand) (*clusterv1.MetaResult, error)
}

// Partitions are the partitions of the cluster as the services reach
// them from this node.
type Partitions interface {
	// Route serves a call for partition id of e: local on this node's
	// replica when it leads the partition, else remote at its leader,
	// repeated after an unknown outcome only as rep allows (see
	// routing.Forward).
	Route(ctx context.Context, e *clusterv1.Entity, id uint32, rep routing.Repeat,
		local func(r Replica) error, remote func(ctx context.Context, conn grpc.ClientConnInterface) error) error
	// Replica is this node's replica of partition id of e, or nil.
	Replica(e *clusterv1.Entity, id uint32) Replica
	// Call calls the node at addr, which serves the call itself (see
	// routing.Peers.Call).
	Call(ctx context.Context, addr string, call func(ctx context.Context, conn grpc.ClientConnInterface) error) error
	// Addr is this node's address as its peers know it.
	Addr() string
	// Views is what the replicas of each partition of e say about it.
	Views(ctx context.Context, e *clusterv1.Entity) []PartitionView
	// Stopping is closed when the node stops: a long poll ends then.
	Stopping() <-chan struct{}
}

// Replica is one partition replica of this node (a partition.Partition).
type Replica interface {
	// Name is the partition's Raft group.
	Name() string
	IsLeader() bool
	Leader() (address, id string)
	// Ready reports whether the partition's engine has its entity: a
	// leader serves nothing before it does.
	Ready() bool
	Available(path string, sub raftbusv1.SubQueue) bool
	// OldestAvailable is the enqueue time (Unix ms) of the message a
	// receive would get first as this replica sees it, a leader or not,
	// and whether there is one.
	OldestAvailable(path string, sub raftbusv1.SubQueue) (int64, bool)
	// Changes is closed when the replica next applies a batch.
	Changes() <-chan struct{}
	Apply(ctx context.Context, cmd *enginev1.Command) (*enginev1.Result, error)
	ApplyAll(ctx context.Context, cmds []*enginev1.Command) []partition.Applied
	Receive(ctx context.Context, lock *enginev1.Lock, maxWait time.Duration) ([]*raftbusv1.ReceivedMessage, error)
	AcceptSession(ctx context.Context, accept *enginev1.AcceptSession, maxWait time.Duration) (*enginev1.AcceptSessionResult, error)
	// Read runs fn on the engine once a read index confirms this replica
	// leads and is current.
	Read(ctx context.Context, fn func(e *engine.Engine)) error
	// Now is the time the leader stamps on its next command, in Unix ms.
	Now() (int64, error)
}

// PartitionView is what the replicas of one partition say about it.
type PartitionView struct {
	LeaderID, LeaderAddr string
	// Configured is the entity generation the leader configured, when a
	// replica that says it leads answered.
	Configured uint64
}

// route is Node.Route for a call with an answer.
func route[Resp any](ctx context.Context, n Node, e *clusterv1.Entity, id uint32, rep routing.Repeat,
	local func(r Replica) (Resp, error),
	remote func(ctx context.Context, conn grpc.ClientConnInterface) (Resp, error),
) (Resp, error) {
	var resp Resp
	err := n.Route(ctx, e, id, rep, func(r Replica) error {
		var err error
		resp, err = local(r)
		return err
	}, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		var err error
		resp, err = remote(ctx, conn)
		return err
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

// atMetaLeader is Node.AtMetaLeader for a change with an answer.
func atMetaLeader[Resp any](ctx context.Context, n Node,
	local func() (Resp, error),
	remote func(ctx context.Context, c raftbusv1.AdminServiceClient) (Resp, error),
) (Resp, error) {
	return metaCall(ctx, n, false, local, remote)
}

// readAtMetaLeader is Node.AtMetaLeader for a read with an answer.
func readAtMetaLeader[Resp any](ctx context.Context, n Node,
	local func() (Resp, error),
	remote func(ctx context.Context, c raftbusv1.AdminServiceClient) (Resp, error),
) (Resp, error) {
	return metaCall(ctx, n, true, local, remote)
}

func metaCall[Resp any](ctx context.Context, n Node, read bool,
	local func() (Resp, error),
	remote func(ctx context.Context, c raftbusv1.AdminServiceClient) (Resp, error),
) (Resp, error) {
	var resp Resp
	err := n.AtMetaLeader(ctx, read, func() error {
		var err error
		resp, err = local()
		return err
	}, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		var err error
		resp, err = remote(ctx, raftbusv1.NewAdminServiceClient(conn))
		return err
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}
