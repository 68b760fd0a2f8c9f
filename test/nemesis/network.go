package nemesis

import (
	"fmt"

	"github.com/raftbus/raftbus/test/netns"
)

// Faults made in the network between the nodes (network namespaces only).
const (
	// Isolate cuts a random node off from the others; healing removes the
	// cut.
	Isolate Kind = "isolate"
	// IsolateLeader cuts the leader of a random partition off from the
	// majority.
	IsolateLeader Kind = "isolate-leader"
	// Bridge splits the others into two halves that only a random node
	// joins.
	Bridge Kind = "bridge"
	// Ring lets each node reach only its neighbours on a ring, each seeing
	// a different majority (five nodes or more; with three, a bridge).
	Ring Kind = "ring"
	// Loss drops packets between nodes at random: on one node's links or
	// on every link.
	Loss Kind = "loss"
	// Slow congests one node's link (the leader's, when one is known).
	Slow Kind = "slow"
)

// NetworkKinds are the faults that need the nodes in network namespaces.
var NetworkKinds = []Kind{Isolate, IsolateLeader, Bridge, Ring, Loss, Slow}

// The link Slow leaves a node: a fraction of what a loaded run sends, so
// replication queues behind it.
const (
	slowRate    = "512kbit"
	slowLatency = "400ms"
)

// heal is the healing of every network fault: the network's Heal.
func (n *Nemesis) heal() func() {
	return func() { n.record("heal network", true, func() error { return n.harness(n.Network.Heal()) }) }
}

func (n *Nemesis) host(i int) *netns.Host { return n.Network.Hosts()[i] }

func isolate(leader bool) injector {
	return func(n *Nemesis) func() {
		if n.Network == nil {
			return nil
		}
		i := n.pick(leader)
		if i < 0 {
			return nil
		}
		kind := Isolate
		if leader {
			kind = IsolateLeader
		}
		n.record(fmt.Sprintf("%s %s", kind, n.Cluster.Nodes[i].ID), false, func() error { return n.harness(n.Network.Isolate(n.host(i))) })
		return n.heal()
	}
}

func bridge(n *Nemesis) func() {
	if n.Network == nil || len(n.Cluster.Nodes) < 3 {
		return nil
	}
	i := n.Rand.IntN(len(n.Cluster.Nodes))
	n.record("bridge "+n.Cluster.Nodes[i].ID, false, func() error { return n.harness(n.Network.Bridge(n.host(i))) })
	return n.heal()
}

func ring(n *Nemesis) func() {
	if n.Network == nil {
		return nil
	}
	if len(n.Cluster.Nodes) < 5 {
		return bridge(n)
	}
	first := n.Rand.IntN(len(n.Cluster.Nodes))
	n.record(fmt.Sprintf("ring from %s", n.Cluster.Nodes[first].ID), false, func() error { return n.harness(n.Network.Ring(first)) })
	return n.heal()
}

func loss(n *Nemesis) func() {
	if n.Network == nil {
		return nil
	}
	hosts := n.Network.Hosts()
	what := "every link"
	p := 0.1 + 0.2*n.Rand.Float64()
	if n.Rand.IntN(2) == 0 {
		i := n.Rand.IntN(len(hosts))
		hosts, what = hosts[i:i+1], n.Cluster.Nodes[i].ID
		p += 0.2
	}
	n.record(fmt.Sprintf("loss %s %.0f%%", what, 100*p), false, func() error { return n.harness(n.Network.Lossy(hosts, p)) })
	return n.heal()
}

func slow(n *Nemesis) func() {
	if n.Network == nil {
		return nil
	}
	i := n.pick(true)
	if i < 0 {
		i = n.Rand.IntN(len(n.Cluster.Nodes))
	}
	n.record(fmt.Sprintf("slow %s %s %s", n.Cluster.Nodes[i].ID, slowRate, slowLatency), false,
		func() error { return n.harness(n.Network.Slow(n.host(i), slowRate, slowLatency)) })
	return n.heal()
}
