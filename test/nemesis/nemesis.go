// Package nemesis injects faults into a cluster of raftbusd processes while
// a workload runs: it kills, stops (SIGTERM) and pauses nodes (often a
// partition leader, sometimes two of five at once), crashes the whole
// cluster, restarts every node in turn, drains a node and takes it back,
// restarts a node with a skewed clock, damages a killed node's log or
// metadata log before it restarts, fails the disk under a node when
// each node has one of its own, and, when the nodes run in
// network namespaces, cuts nodes and leaders off, splits the cluster
// around a bridge node or into a ring of overlapping majorities, and makes
// links lossy or congested. Each fault is held for a while and then
// healed, and both are recorded in the run's history.
//
// The choice of faults comes from a seeded random source, so a run that
// found a bug can be repeated with its seed. Each kind of fault is an
// injector registered in injectors; a new kind is a new file that adds
// one.
package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/history"
	"github.com/raftbus/raftbus/test/netns"
	"github.com/raftbus/raftbus/test/procs"
)

// Kind is one kind of fault.
type Kind string

// injector applies one fault of its kind and returns what heals it, or nil
// when the fault cannot be applied now (no leader known, too few nodes,
// no network). Faults and healings go through Nemesis.record.
type injector func(n *Nemesis) (heal func())

// injectors are the kinds of fault the nemesis knows; files add theirs.
var injectors = map[Kind]injector{
	Kill:          kill(false),
	KillLeader:    kill(true),
	Pause:         pause,
	KillAll:       killAll,
	Term:          term,
	KillTwo:       killTwo,
	ClockSkew:     clockSkew,
	Isolate:       isolate(false),
	IsolateLeader: isolate(true),
	Bridge:        bridge,
	Ring:          ring,
	Loss:          loss,
	Slow:          slow,
	Corrupt:       corrupt,
}

// Nemesis injects faults into one cluster.
type Nemesis struct {
	Cluster *procs.Cluster
	// Network, when the nodes run in namespaces, enables the network faults.
	Network *netns.Network
	// Entity is the entity whose partition leaders the leader faults aim at.
	Entity string
	Kinds  []Kind
	// InTurn takes the kinds in turn rather than at random, so that a
	// short run meets each of them.
	InTurn bool
	Rand   *rand.Rand
	// History receives a Fault op for each fault and each healing.
	History *history.Recorder
	// Log, when set, is told what happens.
	Log func(format string, args ...any)

	// err is the first failure of the harness itself (a command that
	// could not run); it stops Run.
	err error
}

// Run injects a fault every interval and heals it after a hold drawn
// between hold/2 and 3*hold/2, until ctx ends; it leaves the cluster
// healed. It returns how many faults it injected, and an error when the
// harness itself failed (the cluster is healed as far as possible).
func (n *Nemesis) Run(ctx context.Context, interval, hold time.Duration) (int, error) {
	count := 0
	if len(n.Kinds) == 0 {
		<-ctx.Done()
		return 0, nil
	}
	for n.err == nil {
		select {
		case <-ctx.Done():
			return count, n.err
		case <-time.After(interval):
		}
		k := n.Kinds[n.Rand.IntN(len(n.Kinds))]
		if n.InTurn {
			k = n.Kinds[count%len(n.Kinds)]
		}
		applied, err := n.Once(ctx, k, hold/2+time.Duration(n.Rand.Int64N(int64(hold)+1)))
		if err != nil {
			return count, err
		}
		if applied {
			count++
		}
	}
	return count, n.err
}

// Once injects one fault of kind k, holds it for hold (or until ctx
// ends) and heals it. It reports whether the fault could be applied now.
func (n *Nemesis) Once(ctx context.Context, k Kind, hold time.Duration) (bool, error) {
	inject, ok := injectors[k]
	if !ok {
		return false, fmt.Errorf("nemesis: unknown fault kind %q", k)
	}
	heal := inject(n)
	if heal == nil {
		return false, n.err
	}
	t := time.NewTimer(hold)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	heal()
	return true, n.err
}

// record applies a fault (or, with heal, its healing) and writes it to the
// history. An error of do is the cluster's (a node that would not stop):
// the fault is recorded as failed for the checker to report.
func (n *Nemesis) record(what string, heal bool, do func() error) {
	start := n.History.Now()
	err := do()
	op := history.Op{Kind: history.Fault, Fault: what, Heal: heal, Start: start, End: n.History.Now(), Outcome: history.OK}
	if err != nil {
		op.Outcome, op.Error = history.Fail, err.Error()
	}
	n.History.Record(op)
	if n.Log != nil {
		if err != nil {
			n.Log("nemesis: %s: %v", what, err)
		} else {
			n.Log("nemesis: %s", what)
		}
	}
}

// harness runs a step of the harness (iptables, tc): its failure is not
// the cluster's, and stops the run.
func (n *Nemesis) harness(err error) error {
	if err != nil && n.err == nil {
		n.err = err
	}
	return nil
}

// running lists the nodes whose process runs.
func (n *Nemesis) running() []int {
	var out []int
	for i := range n.Cluster.Nodes {
		if n.Cluster.Running(i) {
			out = append(out, i)
		}
	}
	return out
}

// pick chooses a running node: the leader of a random partition of the
// entity when leader is set, else any.
func (n *Nemesis) pick(leader bool) int {
	c := n.Cluster
	running := n.running()
	if len(running) == 0 {
		return -1
	}
	if !leader {
		return running[n.Rand.IntN(len(running))]
	}
	for _, i := range running {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		table, err := raftbusv1.NewAdminServiceClient(c.Conn(i)).GetRoutingTable(ctx, &raftbusv1.GetRoutingTableRequest{EntityPath: n.Entity})
		cancel()
		if err != nil || len(table.GetEntities()) == 0 {
			continue
		}
		parts := table.GetEntities()[0].GetPartitions()
		if len(parts) == 0 {
			continue
		}
		p := parts[n.Rand.IntN(len(parts))]
		if j := c.IndexOf(p.GetLeaderAddress()); j >= 0 && c.Running(j) {
			return j
		}
	}
	return -1
}
