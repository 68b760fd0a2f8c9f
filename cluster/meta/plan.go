package meta

import (
	"slices"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Plan returns the next placement changes the metadata leader should make
// to reach what the membership asks for, in this order:
//
//  1. a partition's preferred leader is never a node being drained or
//     removed (leadership moves before replicas do);
//  2. every replica on a removed node moves to the active, reachable
//     node holding the fewest replicas (one with nowhere to go is
//     dropped: the partition goes on with fewer) — first, as the
//     partition runs a replica short until then;
//  3. a partition with fewer than ReplicationFactor replicas gains one
//     when there are nodes for it, and then every replica on a draining
//     node moves as a removed node's does;
//  4. only when none of that is left and no move is under way: one
//     replica moves from the most loaded node to the least loaded when
//     they differ by more than one (a node that joined gets its share),
//     else one preferred leadership moves the same way.
//
// At most maxMoves replica moves are under way at once, so that catching
// up new replicas never takes the cluster's disks and network for itself.
// up tells which nodes the leader hears from: nothing is moved to a node
// that is not. Plan is a pure function of its arguments: entities and
// nodes are taken in their (sorted) order, and ties go to the lowest id.
func Plan(s *clusterv1.MetaSnapshot, up func(id string) bool, maxMoves int) []*clusterv1.MetaCommand {
	p := planner{s: s, load: make(map[string]int), lead: make(map[string]int)}
	active := 0
	for _, m := range s.Nodes {
		if Active(m) {
			active++
			if up(m.NodeId) {
				p.targets = append(p.targets, m.NodeId)
			}
		}
	}
	for _, e := range s.Entities {
		for _, pl := range e.Partitions {
			for _, id := range pl.NodeIds {
				p.load[id]++
			}
			if len(pl.NodeIds) > 0 {
				p.lead[pl.NodeIds[0]]++
			}
			if pl.Move != nil {
				p.inflight++
			}
		}
	}
	rf := min(ReplicationFactor, active)
	settled := true
	// Three passes, most urgent first: replicas on removed nodes (the
	// partition runs a replica short), then partitions with too few
	// replicas, then replicas on draining nodes.
	for pass := range 3 {
		for _, e := range s.Entities {
			for i, pl := range e.Partitions {
				id := uint32(i)
				if pass == 0 {
					if len(pl.NodeIds) > 0 && !p.active(pl.NodeIds[0]) {
						if j := slices.IndexFunc(pl.NodeIds, p.active); j > 0 {
							p.prefer(e, id, pl, pl.NodeIds[j])
						}
					}
					// A move to a node removed since cannot finish: it
					// goes to another node, or to none.
					if mv := pl.Move; mv != nil && mv.To != "" && p.removed(mv.To) {
						settled = false
						p.redirect(e, id, mv.To, p.target(pl))
					}
				}
				if pl.Move != nil {
					continue
				}
				removed := slices.IndexFunc(pl.NodeIds, p.removed)
				draining := slices.IndexFunc(pl.NodeIds, func(n string) bool { return !p.active(n) })
				var from string
				switch {
				case pass == 0 && removed >= 0:
					from = pl.NodeIds[removed]
				case pass == 1 && removed < 0 && len(pl.NodeIds) < rf:
				case pass == 2 && removed < 0 && len(pl.NodeIds) >= rf && draining >= 0:
					from = pl.NodeIds[draining]
				default:
					continue
				}
				settled = false
				if p.inflight >= maxMoves {
					continue
				}
				switch to := p.target(pl); {
				case to != "":
					p.move(e, id, from, to)
				case from != "" && p.removed(from) && len(pl.NodeIds) > 1:
					// Nowhere to go: the partition goes on without it.
					p.move(e, id, from, "")
				}
			}
		}
	}
	if settled && p.inflight == 0 && maxMoves > 0 {
		if !p.spreadReplicas() {
			p.spreadLeaders()
		}
	}
	return p.out
}

type planner struct {
	s        *clusterv1.MetaSnapshot
	targets  []string       // active, reachable nodes in id order
	load     map[string]int // replicas per node
	lead     map[string]int // preferred leaderships per node
	inflight int
	out      []*clusterv1.MetaCommand
}

func (p *planner) active(id string) bool {
	m := FindNode(p.s, id)
	return m != nil && Active(m)
}

func (p *planner) removed(id string) bool {
	m := FindNode(p.s, id)
	return m == nil || m.GetMembership() == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED
}

// target is the reachable active node without a replica of pl (nor one
// moving off it) that holds the fewest replicas.
func (p *planner) target(pl *clusterv1.Placement) string {
	best := ""
	for _, id := range p.targets {
		if slices.Contains(pl.NodeIds, id) || id == pl.GetMove().GetFrom() {
			continue
		}
		if best == "" || p.load[id] < p.load[best] {
			best = id
		}
	}
	return best
}

func (p *planner) move(e *clusterv1.Entity, partition uint32, from, to string) {
	p.out = append(p.out, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_MoveReplica{MoveReplica: &clusterv1.MoveReplica{
		Entity: e.Name, Incarnation: e.Incarnation, PartitionId: partition, From: from, To: to,
	}}})
	p.inflight++
	if from != "" {
		p.load[from]--
	}
	if to != "" {
		p.load[to]++
	}
}

func (p *planner) redirect(e *clusterv1.Entity, partition uint32, from, to string) {
	p.out = append(p.out, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_RedirectMove{RedirectMove: &clusterv1.RedirectMove{
		Entity: e.Name, Incarnation: e.Incarnation, PartitionId: partition, To: to,
	}}})
	p.load[from]--
	if to != "" {
		p.load[to]++
	}
}

func (p *planner) prefer(e *clusterv1.Entity, partition uint32, pl *clusterv1.Placement, id string) {
	p.out = append(p.out, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_SetPreferredLeader{SetPreferredLeader: &clusterv1.SetPreferredLeader{
		Entity: e.Name, Incarnation: e.Incarnation, PartitionId: partition, NodeId: id,
	}}})
	p.lead[pl.NodeIds[0]]--
	p.lead[id]++
}

// extremes are the targets with the most and the fewest of count.
func (p *planner) extremes(count map[string]int) (hi, lo string) {
	for _, id := range p.targets {
		if hi == "" || count[id] > count[hi] {
			hi = id
		}
		if lo == "" || count[id] < count[lo] {
			lo = id
		}
	}
	return hi, lo
}

// spreadReplicas moves one replica from the most loaded node to the least
// loaded, preferring one the loaded node does not lead.
func (p *planner) spreadReplicas() bool {
	hi, lo := p.extremes(p.load)
	if hi == "" || p.load[hi]-p.load[lo] <= 1 {
		return false
	}
	var fallback *clusterv1.Entity
	fallbackID := -1
	for _, e := range p.s.Entities {
		for i, pl := range e.Partitions {
			if !slices.Contains(pl.NodeIds, hi) || slices.Contains(pl.NodeIds, lo) {
				continue
			}
			if pl.NodeIds[0] != hi {
				p.move(e, uint32(i), hi, lo)
				return true
			}
			if fallback == nil {
				fallback, fallbackID = e, i
			}
		}
	}
	if fallback != nil {
		p.move(fallback, uint32(fallbackID), hi, lo)
		return true
	}
	return false
}

// spreadLeaders hands one preferred leadership from the node that should
// lead the most partitions to the one that should lead the fewest.
func (p *planner) spreadLeaders() {
	hi, lo := p.extremes(p.lead)
	if hi == "" || p.lead[hi]-p.lead[lo] <= 1 {
		return
	}
	for _, e := range p.s.Entities {
		for i, pl := range e.Partitions {
			if len(pl.NodeIds) > 0 && pl.NodeIds[0] == hi && slices.Contains(pl.NodeIds, lo) {
				p.prefer(e, uint32(i), pl, lo)
				return
			}
		}
	}
}
