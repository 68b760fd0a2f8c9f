package cluster

import (
	"context"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// statusTimeout bounds how long cluster views wait for one replica.
const statusTimeout = time.Second

// replicaStatus asks a replica's node (this one included) about it.
func (n *Node) replicaStatus(ctx context.Context, e *clusterv1.Entity, id uint32, nodeAddr string) (*clusterv1.PartitionStatusResponse, error) {
	if nodeAddr == n.addr {
		return n.localReplicaStatus(e, id)
	}
	conn, err := n.peers.Get(nodeAddr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return clusterv1.NewNodeServiceClient(conn).PartitionStatus(ctx, &clusterv1.PartitionStatusRequest{EntityPath: e.GetName(), PartitionId: id})
}

// partitionView is what the replicas of one partition say about it.
type partitionView struct {
	leaderID, leaderAddr string
	// configured is the generation the leader configured, when a replica
	// that says it leads answered.
	configured uint64
	statuses   []*clusterv1.PartitionStatusResponse // by replica, nil when unreachable
}

// viewPartitions asks every replica of every partition of e, concurrently.
func (n *Node) viewPartitions(ctx context.Context, e *clusterv1.Entity) []partitionView {
	addrs := n.nodeAddrs()
	views := make([]partitionView, len(e.GetPartitions()))
	var wg sync.WaitGroup
	for id, pl := range e.GetPartitions() {
		views[id].statuses = make([]*clusterv1.PartitionStatusResponse, len(pl.GetNodeIds()))
		for k, nid := range pl.GetNodeIds() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := n.replicaStatus(ctx, e, uint32(id), addrs[nid])
				if err == nil {
					views[id].statuses[k] = st
				}
			}()
		}
	}
	wg.Wait()
	for id := range views {
		v := &views[id]
		var term uint64
		for _, st := range v.statuses {
			// The replica with the highest term knows the latest leader.
			if st != nil && st.GetLeaderAddress() != "" && st.GetTerm() >= term {
				term, v.leaderID, v.leaderAddr = st.GetTerm(), st.GetLeaderNodeId(), st.GetLeaderAddress()
			}
			if st.GetRole() == raftbusv1.ReplicaRole_REPLICA_ROLE_LEADER {
				v.configured = st.GetConfiguredGeneration()
			}
		}
	}
	return views
}

// clusterInfo is what this node knows of the cluster: its members, their
// clocks and logs, and every partition's replicas.
func (n *Node) clusterInfo(ctx context.Context) (*raftbusv1.GetClusterInfoResponse, error) {
	resp := &raftbusv1.GetClusterInfoResponse{}
	var entities []*clusterv1.Entity
	var members []*clusterv1.Node
	n.meta.fsm.View(func(st *clusterv1.MetaSnapshot) {
		resp.ClusterId = st.ClusterId
		for _, e := range st.Entities {
			entities = append(entities, proto.Clone(e).(*clusterv1.Entity))
		}
		for _, m := range st.Nodes {
			members = append(members, proto.Clone(m).(*clusterv1.Node))
		}
	})
	voters := make(map[string]bool)
	if f := n.meta.raft.GetConfiguration(); n.await(ctx, f) == nil {
		for _, srv := range f.Configuration().Servers {
			voters[string(srv.ID)] = srv.Suffrage == raft.Voter
		}
	}
	resp.MaxClockOffset = durationpb.New(n.clocks.monitor.MaxOffset())
	replicas, leads, moving := make(map[string]uint32), make(map[string]uint32), make(map[string]uint32)
	for _, e := range entities {
		for _, pl := range e.GetPartitions() {
			for _, id := range pl.GetNodeIds() {
				replicas[id]++
			}
			if len(pl.GetNodeIds()) > 0 {
				leads[pl.GetNodeIds()[0]]++
			}
			if mv := pl.GetMove(); mv != nil {
				moving[mv.GetFrom()]++
				moving[mv.GetTo()]++
			}
		}
	}
	// Each member that does not answer costs statusTimeout, and so may a
	// leadership that cannot be confirmed: ask them all at once.
	var leaderID string
	states := make([]raftbusv1.NodeState, len(members))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		leaderID = n.confirmedMetaLeader(ctx)
	}()
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i] = n.nodeState(ctx, m)
		}()
	}
	wg.Wait()
	for i, m := range members {
		ni := &raftbusv1.NodeInfo{
			Membership:           m.GetMembership(),
			Replicas:             replicas[m.NodeId],
			PreferredLeaderships: leads[m.NodeId],
			ReplicasMoving:       moving[m.NodeId],
			NodeId:               m.NodeId,
			Address:              m.Address,
			State:                states[i],
			MetadataVoter:        voters[m.NodeId],
			MetadataLeader:       leaderID == m.NodeId,
			Incarnation:          m.Incarnation,
			ClockState:           n.clocks.peerState(m.NodeId),
		}
		if m.NodeId == n.cfg.NodeID {
			ni.ClockState = n.clocks.state()
		} else if meas, ok := n.clocks.monitor.Latest(m.NodeId, n.clocks.src.Monotonic()); ok {
			ni.ClockOffset = durationpb.New(meas.Offset)
		}
		resp.Nodes = append(resp.Nodes, ni)
	}
	n.addNodeStats(ctx, resp.Nodes)
	for _, e := range entities {
		for id, v := range n.viewPartitions(ctx, e) {
			pi := &raftbusv1.PartitionInfo{EntityPath: e.GetName(), PartitionId: uint32(id), LeaderNodeId: v.leaderID, LeaderAddress: v.leaderAddr}
			for k, nid := range e.GetPartitions()[id].GetNodeIds() {
				ri := &raftbusv1.ReplicaInfo{NodeId: nid, Role: raftbusv1.ReplicaRole_REPLICA_ROLE_UNKNOWN}
				if st := v.statuses[k]; st != nil {
					ri.Role, ri.AppliedIndex = st.GetRole(), st.GetAppliedIndex()
					ri.Health, ri.Damage = st.GetHealth(), st.GetDamage()
					if st.GetRole() == raftbusv1.ReplicaRole_REPLICA_ROLE_LEADER {
						pi.Term, pi.CommitIndex, pi.AppliedIndex = st.GetTerm(), st.GetCommitIndex(), st.GetAppliedIndex()
					}
				}
				pi.Replicas = append(pi.Replicas, ri)
			}
			resp.Partitions = append(resp.Partitions, pi)
		}
	}
	return resp, nil
}

// confirmedMetaLeader is the id of the metadata group's leader as this
// node knows it, "" when there is none. When this node believes it leads,
// a quorum must confirm it first: a leader paused for less than an
// election timeout believes it leads after it resumes, until its lease
// check, while the others may have elected another.
func (n *Node) confirmedMetaLeader(ctx context.Context) string {
	_, id := n.meta.raft.LeaderWithID()
	if string(id) != n.cfg.NodeID {
		return string(id)
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if err := n.meta.confirmLeadership(ctx); err != nil {
		return ""
	}
	return string(id)
}

// nodeState says whether a member answers: this node always does; another
// is up when a connection to it is ready within statusTimeout.
func (n *Node) nodeState(ctx context.Context, m *clusterv1.Node) raftbusv1.NodeState {
	if m.NodeId == n.cfg.NodeID {
		return raftbusv1.NodeState_NODE_STATE_UP
	}
	conn, err := n.peers.Get(m.Address)
	if err != nil {
		return raftbusv1.NodeState_NODE_STATE_DOWN
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			return raftbusv1.NodeState_NODE_STATE_DOWN
		}
	}
	return raftbusv1.NodeState_NODE_STATE_UP
}

// runtimeSamples are the runtime/metrics runtimeStats reads, in the order
// of NodeRuntimeStats' fields.
var runtimeSamples = []string{"/gc/heap/allocs:bytes", "/gc/heap/allocs:objects", "/gc/cycles/total:gc-cycles"}

// runtimeStats are the process's allocation counters.
func runtimeStats() *raftbusv1.NodeRuntimeStats {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, name := range runtimeSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return &raftbusv1.NodeRuntimeStats{AllocatedBytes: v(0), Allocations: v(1), GcCycles: v(2)}
}
