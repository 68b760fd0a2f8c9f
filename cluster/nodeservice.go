package cluster

import (
	"context"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/metadata"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// nodeService implements raftbus.cluster.v1.NodeService, the calls nodes
// make to each other.
type nodeService struct {
	clusterv1.UnimplementedNodeServiceServer
	n *Node
}

func (s *nodeService) Join(ctx context.Context, req *clusterv1.JoinRequest) (*clusterv1.JoinResponse, error) {
	if req.GetNodeId() == "" || req.GetAddress() == "" {
		return nil, invalid("a joining node needs an id and an address")
	}
	n := s.n
	if !n.meta.isLeader() {
		if forwarded(ctx) {
			return nil, n.meta.notLeader()
		}
		addr := n.meta.leaderAddr()
		if addr == "" {
			return nil, busy("the metadata group has no leader yet")
		}
		conn, err := n.peers.get(addr)
		if err != nil {
			return nil, err
		}
		return clusterv1.NewNodeServiceClient(conn).Join(metadata.AppendToOutgoingContext(ctx, ForwardKey, NeverForward), req)
	}
	if addrs := n.nodeAddrs(); addrs[req.GetNodeId()] != "" && addrs[req.GetNodeId()] != req.GetAddress() {
		n.log.Info("member changes address", "member", req.GetNodeId(), "from", addrs[req.GetNodeId()], "to", req.GetAddress())
	}
	if err := n.meta.addMember(ctx, req); err != nil {
		return nil, err
	}
	var id string
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) { id = s.ClusterId })
	return &clusterv1.JoinResponse{ClusterId: id}, nil
}

func (s *nodeService) PartitionRuntime(ctx context.Context, req *clusterv1.PartitionRuntimeRequest) (*clusterv1.PartitionRuntimeResponse, error) {
	e, err := s.n.resolve(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	props, err := s.n.partitionRuntime(ctx, e.entity, e.path, req.GetPartitionId())
	if err != nil {
		return nil, err
	}
	return &clusterv1.PartitionRuntimeResponse{Properties: props}, nil
}

func (s *nodeService) PartitionStatus(ctx context.Context, req *clusterv1.PartitionStatusRequest) (*clusterv1.PartitionStatusResponse, error) {
	e, err := s.n.entity(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	r := s.n.replica(e, req.GetPartitionId())
	if r == nil {
		return nil, notFound("this node holds no replica of %s partition %d", e.GetName(), req.GetPartitionId())
	}
	info := r.p.Info()
	var digest []byte
	if req.GetIncludeDigest() {
		d := r.p.Digest()
		digest = d[:]
	}
	return &clusterv1.PartitionStatusResponse{
		Role:                 roleOf(info.State),
		Term:                 info.Term,
		CommitIndex:          info.CommitIndex,
		AppliedIndex:         info.AppliedIndex,
		LeaderNodeId:         info.LeaderID,
		LeaderAddress:        info.LeaderAddress,
		ConfiguredGeneration: r.configured.Load(),
		Digest:               digest,
	}, nil
}

func roleOf(s raft.RaftState) raftbusv1.ReplicaRole {
	switch s {
	case raft.Leader:
		return raftbusv1.ReplicaRole_REPLICA_ROLE_LEADER
	case raft.Follower:
		return raftbusv1.ReplicaRole_REPLICA_ROLE_FOLLOWER
	case raft.Candidate:
		return raftbusv1.ReplicaRole_REPLICA_ROLE_CANDIDATE
	}
	return raftbusv1.ReplicaRole_REPLICA_ROLE_UNKNOWN
}
