package nemesis

import (
	"fmt"
	"time"
)

// Faults made with processes and signals.
const (
	// Kill SIGKILLs a random node; healing restarts it.
	Kill Kind = "kill"
	// KillLeader SIGKILLs the leader of a random partition of the entity.
	KillLeader Kind = "kill-leader"
	// Pause SIGSTOPs a random node; healing SIGCONTs it.
	Pause Kind = "pause"
	// KillAll SIGKILLs every node at once; healing restarts them all.
	KillAll Kind = "kill-all"
	// Term stops a partition leader (or any node when none is known) with
	// SIGTERM, as an operator would, and expects it to exit within
	// TermTimeout; healing restarts it.
	Term Kind = "term"
	// KillTwo SIGKILLs two nodes at once: a minority of five, the most a
	// five-node cluster must survive. It needs five nodes or more.
	KillTwo Kind = "kill-two"
	// ClockSkew restarts a node with its wall clock ClockOffset ahead
	// (RAFTBUS_FAULT_CLOCK_OFFSET); healing restarts it with the true
	// time.
	ClockSkew Kind = "skew"
)

// ProcessKinds are the faults that need nothing but processes.
var ProcessKinds = []Kind{Kill, KillLeader, Pause, KillAll, Term, KillTwo, ClockSkew, Corrupt, CorruptMeta, Drain, RollingRestart, Replace}

// TermTimeout is how long a node may take to stop on SIGTERM: handing
// over leadership and closing its partitions.
const TermTimeout = 30 * time.Second

// ClockOffset is how far ClockSkew moves a node's clock: well beyond any
// lock duration and the default duplicate detection window.
const ClockOffset = 11 * time.Minute

func kill(leader bool) injector {
	return func(n *Nemesis) func() {
		c := n.Cluster
		i := n.pick(leader)
		if i < 0 {
			return nil
		}
		kind := Kill
		if leader {
			kind = KillLeader
		}
		n.record(fmt.Sprintf("%s %s", kind, c.Nodes[i].ID), false, func() error { c.Kill(i); return nil })
		return func() { n.record("restart "+c.Nodes[i].ID, true, func() error { c.Restart(i); return nil }) }
	}
}

func pause(n *Nemesis) func() {
	c := n.Cluster
	i := n.pick(false)
	if i < 0 {
		return nil
	}
	n.record("pause "+c.Nodes[i].ID, false, func() error { c.Pause(i); return nil })
	return func() { n.record("resume "+c.Nodes[i].ID, true, func() error { c.Resume(i); return nil }) }
}

func killAll(n *Nemesis) func() {
	c := n.Cluster
	n.record("kill-all", false, func() error {
		for i := range c.Nodes {
			c.Kill(i)
		}
		return nil
	})
	return func() {
		n.record("restart all", true, func() error {
			for i := range c.Nodes {
				if !c.Running(i) {
					c.Restart(i)
				}
			}
			return nil
		})
	}
}

func term(n *Nemesis) func() {
	c := n.Cluster
	i := n.pick(true)
	if i < 0 {
		i = n.pick(false)
	}
	if i < 0 {
		return nil
	}
	n.record("term "+c.Nodes[i].ID, false, func() error { return c.Terminate(i, TermTimeout) })
	return func() { n.record("restart "+c.Nodes[i].ID, true, func() error { c.Restart(i); return nil }) }
}

func killTwo(n *Nemesis) func() {
	c := n.Cluster
	running := n.running()
	if len(c.Nodes) < 5 || len(running) < len(c.Nodes) {
		return nil
	}
	n.Rand.Shuffle(len(running), func(a, b int) { running[a], running[b] = running[b], running[a] })
	two := running[:2]
	n.record(fmt.Sprintf("kill-two %s %s", c.Nodes[two[0]].ID, c.Nodes[two[1]].ID), false, func() error {
		c.Kill(two[0])
		c.Kill(two[1])
		return nil
	})
	return func() {
		n.record(fmt.Sprintf("restart %s %s", c.Nodes[two[0]].ID, c.Nodes[two[1]].ID), true, func() error {
			c.Restart(two[0])
			c.Restart(two[1])
			return nil
		})
	}
}

// clockSkew restarts a node (a partition leader when one is known) with a
// clock ClockOffset ahead, a leader whose clock runs fast; the node reads
// the offset at start.
func clockSkew(n *Nemesis) func() {
	c := n.Cluster
	i := n.pick(true)
	if i < 0 {
		i = n.pick(false)
	}
	if i < 0 {
		return nil
	}
	node := c.Nodes[i]
	n.record(fmt.Sprintf("skew %s %+v", node.ID, ClockOffset), false, func() error {
		c.Kill(i)
		node.Env = []string{"RAFTBUS_FAULT_CLOCK_OFFSET=" + ClockOffset.String()}
		c.Restart(i)
		return nil
	})
	return func() {
		n.record("unskew "+node.ID, true, func() error {
			c.Kill(i)
			node.Env = nil
			c.Restart(i)
			return nil
		})
	}
}
