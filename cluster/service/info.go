package service

import (
	"context"

	"google.golang.org/protobuf/proto"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func (s *Admin) GetRoutingTable(ctx context.Context, req *raftbusv1.GetRoutingTableRequest) (*raftbusv1.GetRoutingTableResponse, error) {
	var entities []*clusterv1.Entity
	if req.GetEntityPath() != "" {
		e, err := s.node.Entity(ctx, req.GetEntityPath())
		if err != nil {
			return nil, err
		}
		entities = append(entities, e)
	} else {
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			for _, e := range st.Entities {
				entities = append(entities, proto.Clone(e).(*clusterv1.Entity))
			}
		})
	}
	addrs := s.node.NodeAddrs()
	resp := &raftbusv1.GetRoutingTableResponse{}
	for _, e := range entities {
		route := &raftbusv1.EntityRoute{EntityPath: e.GetName(), PartitionCount: uint32(len(e.GetPartitions())),
			RequiresDuplicateDetection: e.GetQueue().GetRequiresDuplicateDetection() || e.GetTopic().GetRequiresDuplicateDetection()}
		for id, v := range s.node.Views(ctx, e) {
			pr := &raftbusv1.PartitionRoute{PartitionId: uint32(id), LeaderNodeId: v.LeaderID, LeaderAddress: v.LeaderAddr}
			for _, nid := range e.GetPartitions()[id].GetNodeIds() {
				pr.ReplicaAddresses = append(pr.ReplicaAddresses, addrs[nid])
			}
			route.Partitions = append(route.Partitions, pr)
		}
		resp.Entities = append(resp.Entities, route)
	}
	return resp, nil
}

func (s *Admin) GetClusterInfo(ctx context.Context, _ *raftbusv1.GetClusterInfoRequest) (*raftbusv1.GetClusterInfoResponse, error) {
	return s.node.ClusterInfo(ctx)
}

// PartitionRuntime serves NodeService.PartitionRuntime: another node asks
// this one, which leads the partition, for its counts (see
// partitionRuntime).
func (s *Admin) PartitionRuntime(ctx context.Context, req *clusterv1.PartitionRuntimeRequest) (*clusterv1.PartitionRuntimeResponse, error) {
	t, err := resolve(ctx, s.node, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	props, err := s.partitionRuntime(ctx, t.entity, t.path, req.GetPartitionId())
	if err != nil {
		return nil, err
	}
	return &clusterv1.PartitionRuntimeResponse{Properties: props}, nil
}
