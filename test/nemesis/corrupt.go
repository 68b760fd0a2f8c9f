package nemesis

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Corrupt SIGKILLs a node (the leader of a random partition half the
// time), flips one bit at a random place in a random batch of its node
// log, and restarts it on healing. The batch is never the log's last: a
// crash may tear that one, and losing it is no damage. The node must find
// the damage when it starts, rebuild the replicas it hurt from the other
// nodes, and never serve what it read wrong.
const Corrupt Kind = "corrupt"

func corrupt(n *Nemesis) (heal func()) {
	c := n.Cluster
	// The fault model is the loss of a minority: one damaged copy of a
	// group at a time. While a replica damaged before is still being
	// rebuilt, a second node's damage could hit the same group, and two
	// copies of three out is a lost majority, which no broker survives.
	if !n.replicasHealthy() {
		return nil
	}
	i := n.pick(n.Rand.IntN(2) == 0)
	if i < 0 {
		return nil
	}
	var what string
	n.record(fmt.Sprintf("corrupt %s", c.Nodes[i].ID), false, func() error {
		c.Kill(i)
		what = flipInNodeLog(filepath.Join(c.Nodes[i].DataDir, "log"), n.Rand)
		return nil
	})
	if n.Log != nil {
		n.Log("nemesis: %s", what)
	}
	return func() { n.record("restart "+c.Nodes[i].ID, true, func() error { c.Restart(i); return nil }) }
}

// CorruptMeta SIGKILLs a node, damages every stored copy of the entity's
// name in its metadata log, and restarts it on healing. bbolt does not
// check the entries it stores; their checksums do, at start: the node must
// rebuild its metadata log from the other nodes (a non-voter until the
// leader has made the change), and act on nothing it read wrong.
const CorruptMeta Kind = "corrupt-meta"

func init() { injectors[CorruptMeta] = corruptMeta }

func corruptMeta(n *Nemesis) (heal func()) {
	c := n.Cluster
	// One damaged copy at a time, as for Corrupt: a second node's
	// damage while the first still rebuilds is not a minority's loss.
	if !n.replicasHealthy() {
		return nil
	}
	i := n.pick(false)
	if i < 0 {
		return nil
	}
	var what string
	n.record(fmt.Sprintf("corrupt-meta %s", c.Nodes[i].ID), false, func() error {
		c.Kill(i)
		what = flipInMetaLog(filepath.Join(c.Nodes[i].DataDir, "meta", "raft.db"), n.Entity)
		return nil
	})
	if n.Log != nil {
		n.Log("nemesis: %s", what)
	}
	return func() {
		id := c.Nodes[i].ID
		before := rebuildsLogged(c.Nodes[i].LogPath)
		n.record("restart "+id, true, func() error {
			c.Restart(i)
			// The node must come back, on a rebuilt metadata log.
			if err := n.awaitAnswer(i); err != nil {
				return fmt.Errorf("%s not answering after its restart on a damaged metadata log: %w", id, err)
			}
			return nil
		})
		if n.Log != nil && rebuildsLogged(c.Nodes[i].LogPath) > before {
			n.Log("nemesis: %s rebuilt its metadata log", id)
		}
	}
}

// rebuildsLogged counts the metadata log rebuilds a node's log tells of.
func rebuildsLogged(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("this node rebuilds it from the other nodes"))
}

// flipInMetaLog changes the case of the first letter of every copy of
// name, as a protobuf string (its length, then its bytes), in the bbolt
// file at path, and says how many it changed. Copies on pages bbolt has
// freed change nothing; one in an entry of the log makes it fail its
// checksum.
func flipInMetaLog(path, name string) string {
	if len(name) < 4 || len(name) > 127 {
		return fmt.Sprintf("entity name %q is too short or too long to find in %s", name, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("read %s: %v", path, err)
	}
	pattern := append([]byte{byte(len(name))}, name...)
	n := 0
	for at := 0; ; {
		k := bytes.Index(data[at:], pattern)
		if k < 0 {
			break
		}
		data[at+k+1] ^= 0x20
		n++
		at += k + len(pattern)
	}
	if n == 0 {
		return fmt.Sprintf("%q is nowhere in %s", name, path)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		return fmt.Sprintf("write %s: %v", path, err)
	}
	return fmt.Sprintf("changed %d copies of %q in %s", n, name, filepath.Base(path))
}

// flipInNodeLog flips one bit inside a batch of the node log in dir that
// has another batch after it, and says where.
func flipInNodeLog(dir string, rnd *rand.Rand) string {
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	slices.Sort(segs)
	type batch struct {
		path       string
		start, end int
	}
	var batches []batch
	for _, s := range segs {
		data, err := os.ReadFile(s)
		if err != nil {
			return fmt.Sprintf("read %s: %v", s, err)
		}
		var starts []int
		for at := 0; ; {
			k := bytes.Index(data[at:], []byte("RBLOGBAT"))
			if k < 0 {
				break
			}
			starts = append(starts, at+k)
			at += k + 1
		}
		for j, st := range starts {
			if j+1 < len(starts) {
				batches = append(batches, batch{s, st, starts[j+1]})
			} else if s != segs[len(segs)-1] {
				batches = append(batches, batch{s, st, st + 16}) // a sealed segment's last: its header
			}
		}
	}
	if len(batches) == 0 {
		return "no batch to damage yet"
	}
	b := batches[rnd.IntN(len(batches))]
	off := b.start + rnd.IntN(b.end-b.start)
	f, err := os.OpenFile(b.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Sprintf("open %s: %v", b.path, err)
	}
	defer f.Close()
	var one [1]byte
	if _, err := f.ReadAt(one[:], int64(off)); err != nil {
		return fmt.Sprintf("read %s: %v", b.path, err)
	}
	one[0] ^= 1 << rnd.IntN(8)
	if _, err := f.WriteAt(one[:], int64(off)); err != nil {
		return fmt.Sprintf("write %s: %v", b.path, err)
	}
	return fmt.Sprintf("flipped a bit at %s:%d, in the batch at %d", filepath.Base(b.path), off, b.start)
}

// replicasHealthy reports whether every partition has its full set of
// healthy copies, as the first running node that answers sees them: a
// leader, every replica answering (leader or follower) and healthy (not
// damaged, not being rebuilt), and no replica moving. A move is a copy
// not yet made: after a node is replaced, its partitions' new replicas
// catch up before they vote, and until then a damaged second copy leaves
// one of three.
func (n *Nemesis) replicasHealthy() bool {
	for _, i := range n.running() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := raftbusv1.NewAdminServiceClient(n.Cluster.Conn(i)).GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		cancel()
		if err != nil {
			continue
		}
		for _, nd := range info.GetNodes() {
			if nd.GetReplicasMoving() > 0 {
				return false
			}
		}
		for _, p := range info.GetPartitions() {
			if p.GetLeaderNodeId() == "" {
				return false
			}
			for _, r := range p.GetReplicas() {
				answering := r.GetRole() == raftbusv1.ReplicaRole_REPLICA_ROLE_LEADER || r.GetRole() == raftbusv1.ReplicaRole_REPLICA_ROLE_FOLLOWER
				if !answering || r.GetHealth() != raftbusv1.ReplicaHealth_REPLICA_HEALTH_HEALTHY {
					return false
				}
			}
		}
		return true
	}
	return false
}
