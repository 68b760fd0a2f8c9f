package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/cluster/service"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// nodeService implements raftbus.cluster.v1.NodeService, the calls nodes
// make to each other.
type nodeService struct {
	clusterv1.UnimplementedNodeServiceServer
	n *Node
	// admin and msg serve what a public service asks of another node:
	// a partition's counts, a wait for messages.
	admin *service.Admin
	msg   *service.Messaging
}

func (s *nodeService) Join(ctx context.Context, req *clusterv1.JoinRequest) (*clusterv1.JoinResponse, error) {
	if req.GetNodeId() == "" || req.GetAddress() == "" {
		return nil, apierror.Invalid("a joining node needs an id and an address")
	}
	n := s.n
	if !n.meta.isLeader() {
		if routing.Forwarded(ctx) {
			return nil, n.meta.notLeader()
		}
		addr := n.meta.leaderAddr()
		if addr == "" {
			return nil, apierror.Busy("the metadata group has no leader yet")
		}
		conn, err := n.peers.Get(addr)
		if err != nil {
			return nil, err
		}
		return clusterv1.NewNodeServiceClient(conn).Join(routing.NoForward(ctx), req)
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
	return s.admin.PartitionRuntime(ctx, req)
}

func (s *nodeService) PartitionStatus(ctx context.Context, req *clusterv1.PartitionStatusRequest) (*clusterv1.PartitionStatusResponse, error) {
	e, err := s.n.entity(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	st, err := s.n.localReplicaStatus(e, req.GetPartitionId())
	if err != nil || !req.GetIncludeDigest() {
		return st, err
	}
	if r := s.n.replica(e, req.GetPartitionId()); r != nil {
		d := r.p.Digest()
		st.Digest = d[:]
	}
	return st, nil
}

func (s *nodeService) DemoteReplica(ctx context.Context, req *clusterv1.DemoteReplicaRequest) (*clusterv1.DemoteReplicaResponse, error) {
	e, err := s.n.entity(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	if e.GetIncarnation() != req.GetIncarnation() {
		return nil, apierror.NotFound("%s was deleted and created again since", req.GetEntityPath())
	}
	if req.GetPartitionId() >= uint32(len(e.GetPartitions())) {
		return nil, apierror.Invalid("%s has no partition %d", e.GetName(), req.GetPartitionId())
	}
	r := s.n.replica(e, req.GetPartitionId())
	if r == nil || !r.p.IsLeader() {
		if r != nil {
			return nil, apierror.From(r.p.NotLeader())
		}
		return nil, apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "this node holds no replica of partition %s", groupName(e, req.GetPartitionId()))
	}
	index, err := s.n.demote(r, req.GetNodeId())
	if err != nil {
		return nil, err
	}
	return &clusterv1.DemoteReplicaResponse{ConfigurationIndex: index}, nil
}

func (s *nodeService) NodeStatus(context.Context, *clusterv1.NodeStatusRequest) (*clusterv1.NodeStatusResponse, error) {
	return &clusterv1.NodeStatusResponse{Log: s.n.logStats(), Messages: s.n.messageStats(), Runtime: runtimeStats()}, nil
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

func (s *nodeService) AwaitMessages(ctx context.Context, req *clusterv1.AwaitMessagesRequest) (*clusterv1.AwaitMessagesResponse, error) {
	return s.msg.AwaitMessages(ctx, req)
}

// FinishMove records, on the metadata leader, that a partition's replica
// move is done (see moves.go).
func (s *nodeService) FinishMove(ctx context.Context, req *clusterv1.FinishMoveRequest) (*clusterv1.FinishMoveResponse, error) {
	if !s.n.meta.isLeader() {
		return nil, s.n.meta.notLeader()
	}
	_, err := s.n.meta.propose(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_FinishMove{FinishMove: req.GetMove()}})
	if err != nil {
		return nil, err
	}
	return &clusterv1.FinishMoveResponse{}, nil
}
