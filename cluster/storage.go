package cluster

import (
	"fmt"
	"path/filepath"

	"github.com/raftbus/raftbus/raftlog"
)

// The node's storage: one node log (raftlog) in <data-dir>/log holds the
// Raft log and stable state of every partition replica on the node, each
// replica's snapshots live in <data-dir>/partitions/<group>, and the
// metadata group keeps its own log in <data-dir>/meta.

func (n *Node) nodeLogDir() string { return filepath.Join(n.cfg.DataDir, "log") }

// openNodeLog opens and replays the node log. A log that cannot be read
// as a whole stops the node: no replica on it can be trusted.
func openNodeLog(n *Node) (*raftlog.Log, error) {
	if old, _ := filepath.Glob(filepath.Join(n.cfg.DataDir, "partitions", "*", "raft.db")); len(old) > 0 {
		return nil, fmt.Errorf("cluster: %s holds partition logs of an earlier raftbus (raft.db in each replica), which this version does not read: start the node with an empty data dir", n.cfg.DataDir)
	}
	dir := n.nodeLogDir()
	l, err := raftlog.Open(dir, raftlog.Options{Logger: n.log, OnDamage: n.logDamaged})
	if err != nil {
		return nil, fmt.Errorf("cluster: the node log cannot be read as a whole, so no partition replica on this node can be trusted (%w). "+
			"Move %s aside (to %s.damaged, say) and start the node again: it then rebuilds each of its replicas from the other nodes. "+
			"A single-node cluster has nothing to rebuild from: restore the data dir from a backup", err, dir, dir)
	}
	return l, nil
}

// logDamaged is told by the node log of a group found damaged on read.
func (n *Node) logDamaged(group string, err error) {
	n.log.Error("partition replica damaged: it will not vote, lead or serve", "group", group, "err", err)
}
