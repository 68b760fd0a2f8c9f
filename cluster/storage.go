package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/raftbus/raftbus/cluster/apierror"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
)

// The node's storage: one node log (raftlog) in <data-dir>/log holds the
// Raft log and stable state of every partition replica on the node, each
// replica's snapshots live in <data-dir>/partitions/<group>, and the
// metadata group keeps its own log in <data-dir>/meta.

func (n *Node) nodeLogDir() string { return filepath.Join(n.cfg.DataDir, "log") }

// openStorage opens and replays the node log, and finds the replicas that
// are damaged or still being rebuilt. A log that cannot be read as a whole
// stops the node: no replica on it can be trusted. A log that is gone from
// a node that has run before makes every replica on it damaged.
func openStorage(n *Node) error {
	if old, _ := filepath.Glob(filepath.Join(n.cfg.DataDir, "partitions", "*", "raft.db")); len(old) > 0 {
		return fmt.Errorf("cluster: %s holds partition logs of an earlier raftbus (raft.db in each replica), which this version does not read: start the node with an empty data dir", n.cfg.DataDir)
	}
	dir := n.nodeLogDir()
	_, err := os.Stat(dir)
	_, metaErr := os.Stat(filepath.Join(n.cfg.DataDir, metaDirName))
	logLost := errors.Is(err, os.ErrNotExist) && metaErr == nil
	n.nodeLog, err = raftlog.Open(dir, raftlog.Options{
		FS: n.cfg.nodeLogFS, Logger: n.log, OnDamage: n.markDamaged, OnSync: n.metrics.Synced,
		// A log that failed a write takes no more, and Raft cannot go on
		// without keeping terms and votes (hashicorp/raft panics when it
		// cannot): the node stops, saying why, rather than stay up with
		// every replica on it stuck.
		OnFail: func(err error) {
			n.fail(fmt.Errorf("cluster: %w; no replica on this node can store anything more. "+
				"Check the disk under %s (full, read-only, failing) and start the node again: "+
				"it recovers the log up to its last synced write and catches up from the other nodes", err, dir))
		},
	})
	if err != nil {
		return fmt.Errorf("cluster: the node log cannot be read as a whole, so no partition replica on this node can be trusted (%w). "+
			"Move %s aside (to %s.damaged, say) and start the node again: it then rebuilds each of its replicas from the other nodes. "+
			"A single-node cluster has nothing to rebuild from: restore the data dir from a backup", err, dir, dir)
	}
	if logLost {
		n.log.Error("the node log is missing: every partition replica on this node will be rebuilt from the other nodes", "dir", dir)
	}
	return n.findDamage(logLost)
}

// localReplicaStatus reports this node's replica of partition id of e,
// damaged (and closed) ones included.
func (n *Node) localReplicaStatus(e *clusterv1.Entity, id uint32) (*clusterv1.PartitionStatusResponse, error) {
	group := groupName(e, id)
	health, damage := n.health(group)
	r := n.replica(e, id)
	if r == nil {
		if health == raftbusv1.ReplicaHealth_REPLICA_HEALTH_DAMAGED {
			return &clusterv1.PartitionStatusResponse{Role: raftbusv1.ReplicaRole_REPLICA_ROLE_UNKNOWN, Health: health, Damage: damage}, nil
		}
		return nil, apierror.NotFound("this node holds no replica of %s partition %d", e.GetName(), id)
	}
	info := r.p.Info()
	return &clusterv1.PartitionStatusResponse{
		Role:                 roleOf(info.State),
		Term:                 info.Term,
		CommitIndex:          info.CommitIndex,
		AppliedIndex:         info.AppliedIndex,
		LeaderNodeId:         info.LeaderID,
		LeaderAddress:        info.LeaderAddress,
		ConfiguredGeneration: r.configured.Load(),
		Health:               health,
		Damage:               damage,
	}, nil
}

// logStats are the node log's counters.
func (n *Node) logStats() *raftbusv1.NodeLogStats {
	s := n.nodeLog.Stats()
	return &raftbusv1.NodeLogStats{
		Syncs: s.Syncs, Requests: s.Requests, BytesWritten: s.BytesWritten, CarriedBytes: s.CarriedBytes,
		Segments: uint32(s.Segments), SizeBytes: uint64(s.Bytes),
	}
}

// addNodeStats asks every node that is up for its log's, its message and
// its allocation counters.
func (n *Node) addNodeStats(ctx context.Context, nodes []*raftbusv1.NodeInfo) {
	var wg sync.WaitGroup
	for _, ni := range nodes {
		if ni.GetNodeId() == n.cfg.NodeID {
			ni.Log, ni.Messages, ni.Runtime = n.logStats(), n.messageStats(), runtimeStats()
			continue
		}
		if ni.GetState() != raftbusv1.NodeState_NODE_STATE_UP {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := n.peers.Get(ni.GetAddress())
			if err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			if resp, err := clusterv1.NewNodeServiceClient(conn).NodeStatus(ctx, &clusterv1.NodeStatusRequest{}); err == nil {
				ni.Log, ni.Messages, ni.Runtime = resp.GetLog(), resp.GetMessages(), resp.GetRuntime()
			}
		}()
	}
	wg.Wait()
}
