// Package nemesis injects faults into a cluster of raftbusd processes while
// a workload runs: it kills nodes (often a partition leader), pauses them,
// crashes the whole cluster, and, when the nodes run in network namespaces,
// cuts a node or a leader off from the others. Each fault is held for a
// while and then healed, and both are recorded in the run's history.
//
// The choice of faults comes from a seeded random source, so a run that
// found a bug can be repeated with its seed.
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

const (
	// Kill SIGKILLs a random node; healing restarts it.
	Kill Kind = "kill"
	// KillLeader SIGKILLs the leader of a random partition of the entity.
	KillLeader Kind = "kill-leader"
	// Pause SIGSTOPs a random node; healing SIGCONTs it.
	Pause Kind = "pause"
	// KillAll SIGKILLs every node at once; healing restarts them all.
	KillAll Kind = "kill-all"
	// Isolate cuts a random node off from the others (network namespaces
	// only); healing removes the cut.
	Isolate Kind = "isolate"
	// IsolateLeader cuts the leader of a random partition off from the
	// majority.
	IsolateLeader Kind = "isolate-leader"
)

// ProcessKinds are the faults that need nothing but processes.
var ProcessKinds = []Kind{Kill, KillLeader, Pause, KillAll, Corrupt}

// NetworkKinds are the faults that need the nodes in network namespaces.
var NetworkKinds = []Kind{Isolate, IsolateLeader}

// Nemesis injects faults into one cluster.
type Nemesis struct {
	Cluster *procs.Cluster
	// Network, when the nodes run in namespaces, enables the network faults.
	Network *netns.Network
	// Entity is the entity whose partition leaders the leader faults aim at.
	Entity string
	Kinds  []Kind
	Rand   *rand.Rand
	// History receives a Fault op for each fault and each healing.
	History *history.Recorder
	// Log, when set, is told what happens.
	Log func(format string, args ...any)
}

// Run injects a fault every interval, holds it for hold and heals it, until
// ctx ends; it leaves the cluster healed. It returns how many faults it
// injected.
func (n *Nemesis) Run(ctx context.Context, interval, hold time.Duration) int {
	count := 0
	for {
		select {
		case <-ctx.Done():
			return count
		case <-time.After(interval):
		}
		heal := n.inject(n.Kinds[n.Rand.IntN(len(n.Kinds))])
		if heal == nil {
			continue
		}
		count++
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
		heal()
	}
}

// inject applies one fault and returns what heals it (nil when the fault
// could not be applied, e.g. no leader is known).
func (n *Nemesis) inject(k Kind) (heal func()) {
	c := n.Cluster
	switch k {
	case Kill, KillLeader:
		i := n.pick(k == KillLeader)
		if i < 0 {
			return nil
		}
		n.record(fmt.Sprintf("%s %s", k, c.Nodes[i].ID), func() { c.Kill(i) })
		return func() { n.record("restart "+c.Nodes[i].ID, func() { c.Restart(i) }) }
	case Pause:
		i := n.pick(false)
		if i < 0 {
			return nil
		}
		n.record("pause "+c.Nodes[i].ID, func() { c.Pause(i) })
		return func() { n.record("resume "+c.Nodes[i].ID, func() { c.Resume(i) }) }
	case KillAll:
		n.record("kill all", func() {
			for i := range c.Nodes {
				c.Kill(i)
			}
		})
		return func() {
			n.record("restart all", func() {
				for i := range c.Nodes {
					c.Restart(i)
				}
			})
		}
	case Corrupt:
		return n.corrupt()
	case Isolate, IsolateLeader:
		if n.Network == nil {
			return nil
		}
		i := n.pick(k == IsolateLeader)
		if i < 0 {
			return nil
		}
		n.record(fmt.Sprintf("%s %s", k, c.Nodes[i].ID), func() { must(n.Network.Isolate(n.Network.Hosts()[i])) })
		return func() { n.record("heal network", func() { must(n.Network.Heal()) }) }
	}
	panic(fmt.Sprintf("nemesis: unknown fault kind %q", k))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// pick chooses a running node: the leader of a random partition of the
// entity when leader is set, else any.
func (n *Nemesis) pick(leader bool) int {
	c := n.Cluster
	var running []int
	for i := range c.Nodes {
		if c.Running(i) {
			running = append(running, i)
		}
	}
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
		p := parts[n.Rand.IntN(len(parts))]
		if j := c.IndexOf(p.GetLeaderAddress()); j >= 0 && c.Running(j) {
			return j
		}
	}
	return -1
}

// record applies a fault (or healing) and writes it to the history.
func (n *Nemesis) record(what string, do func()) {
	start := n.History.Now()
	do()
	n.History.Record(history.Op{Kind: history.Fault, Fault: what, Start: start, End: n.History.Now()})
	if n.Log != nil {
		n.Log("nemesis: %s", what)
	}
}
