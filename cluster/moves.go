package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/meta"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// Moving a replica, as the metadata leader decides it (meta.Plan) and a
// partition's leader carries it out, one step per look:
//
//  1. MoveReplica names the new node in the placement in the old one's
//     place; the new node opens an empty replica that does not bootstrap.
//  2. The leader adds the new replica to the group as a non-voter; it
//     catches up by snapshot and log without counting towards a quorum.
//  3. Once it has caught up the leader makes it a voter (promoteRebuilt).
//  4. The leader takes the old replica out of the group; when the leader
//     is the old replica, it first hands leadership to the preferred
//     replica, which is never the old one (handOver).
//  5. The leader reports FinishMove; the old node then closes its replica
//     and deletes its data.
//
// The group never has fewer voters than before the move, and each step is
// one Raft configuration change, so a move survives any leader change: a
// new leader looks at the group's configuration and takes the next step.

// moveRetry spaces a leader's steps of a move that is waiting on
// something (a replica catching up, a node that does not answer).
const moveRetry = 500 * time.Millisecond

// moveStepTimeout bounds one step.
const moveStepTimeout = 15 * time.Second

// wantedReplica is a partition replica the metadata places on this node.
type wantedReplica struct {
	entity *clusterv1.Entity
	id     uint32
	// bootstrap is the configuration the replica starts its group with
	// when it has no state: set only on the partition's founders.
	bootstrap []raft.Server
	// placed are the replicas the placement names, preferred the one that
	// should lead.
	placed    []raft.Server
	preferred string
	move      *clusterv1.ReplicaMove
	// elect, set by whoever opens a dormant replica for a request, makes
	// it stand for election as it opens (see quiesce.go).
	elect bool
}

// desiredNow is desiredReplicas, computed again only when the metadata
// has changed since it last was: with thousands of entities, computing it
// (a copy of every entity placed here) on every round of the reconciler
// was most of an idle node's CPU. The map is shared: read it only.
func (n *Node) desiredNow() map[string]wantedReplica {
	desired, _ := n.desiredVersioned()
	return desired
}

// placedKey names a state of what the metadata places on this node and
// of the replicas it holds: a look over every placed partition found what
// it found for as long as the key is the same.
type placedKey struct{ desired, placed uint64 }

// desiredVersioned is desiredNow and the count of its recomputations.
func (n *Node) desiredVersioned() (map[string]wantedReplica, uint64) {
	n.desiredMu.Lock()
	defer n.desiredMu.Unlock()
	if n.desired != nil {
		select {
		case <-n.desiredStale:
		default:
			return n.desired, n.desiredVersion
		}
	}
	stale := n.meta.fsm.Changes()
	n.desired = n.desiredReplicas()
	n.desiredStale = stale
	n.desiredVersion++
	return n.desired, n.desiredVersion
}

// desiredFor is what the metadata wants of this node's replica of group.
func (n *Node) desiredFor(group string) (wantedReplica, bool) {
	w, ok := n.desiredNow()[group]
	return w, ok
}

// desiredReplicas are the replicas the metadata places on this node, by
// group name: those of its placements, and those moving off it.
func (n *Node) desiredReplicas() map[string]wantedReplica {
	desired := make(map[string]wantedReplica)
	me := n.cfg.NodeID
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		addrs := make(map[string]string, len(s.Nodes))
		for _, m := range s.Nodes {
			addrs[m.NodeId] = m.Address
		}
		servers := func(ids []string) []raft.Server {
			out := make([]raft.Server, 0, len(ids))
			for _, id := range ids {
				out = append(out, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addrs[id])})
			}
			return out
		}
		for _, e := range s.Entities {
			placed := false
			for _, pl := range e.Partitions {
				placed = placed || meta.Holds(pl, me)
			}
			if !placed {
				continue
			}
			// A copy: the state machine changes entities in place.
			e := proto.Clone(e).(*clusterv1.Entity)
			for id, pl := range e.Partitions {
				if !meta.Holds(pl, me) {
					continue
				}
				w := wantedReplica{entity: e, id: uint32(id), placed: servers(pl.NodeIds), move: pl.Move}
				if len(pl.NodeIds) > 0 {
					w.preferred = pl.NodeIds[0]
				}
				if slices.Contains(pl.NodeIds, me) {
					w.bootstrap = servers(meta.Bootstrap(pl, me))
				}
				desired[groupName(e, uint32(id))] = w
			}
		}
	})
	return desired
}

// advanceMove takes the next step of the replica move w's placement asks
// for, on r's leader, in the background.
func (n *Node) advanceMove(r *replica, w wantedReplica) {
	if w.move == nil || r.moving.Load() || time.Since(r.lastMoveStep) < moveRetry {
		return
	}
	r.lastMoveStep = time.Now()
	r.moving.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer r.moving.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), moveStepTimeout)
		defer cancel()
		if err := n.moveStep(ctx, r, w); err != nil {
			n.log.Debug("replica move: not yet", "group", r.group, "from", w.move.GetFrom(), "to", w.move.GetTo(), "err", err)
		}
	}()
}

func (n *Node) moveStep(ctx context.Context, r *replica, w wantedReplica) error {
	from, to := w.move.GetFrom(), w.move.GetTo()
	members, err := r.p.Members()
	if err != nil {
		return err
	}
	member := func(id string) (raft.Server, bool) {
		i := slices.IndexFunc(members, func(s raft.Server) bool { return string(s.ID) == id })
		if i < 0 {
			return raft.Server{}, false
		}
		return members[i], true
	}
	// A node removed from the cluster that is still in the group (a move
	// to it was redirected) leaves it first. Only removed nodes: they
	// never come back, so this holds however far behind this node's view
	// of the metadata is.
	for _, s := range members {
		id := string(s.ID)
		if id != from && !slices.ContainsFunc(w.placed, func(p raft.Server) bool { return string(p.ID) == id }) && n.removedMember(id) {
			if err := r.p.RemoveMember(ctx, id); err != nil {
				return err
			}
			n.log.Info("replica move: removed node out of the group", "group", r.group, "node", id)
			return nil
		}
	}
	// A replica moving off a node removed for good leaves the group
	// first: it votes no more, and its address may be the new node's (a
	// machine replaced under a new id), which Raft takes only once.
	if _, ok := member(from); from != "" && ok && from != n.cfg.NodeID && n.removedMember(from) {
		if err := r.p.RemoveMember(ctx, from); err != nil {
			return err
		}
		n.log.Info("replica move: replica of a removed node out of the group", "group", r.group, "from", from)
		return nil
	}
	if to != "" {
		s, ok := member(to)
		if !ok {
			addr := n.nodeAddrs()[to]
			if addr == "" {
				return fmt.Errorf("no address for node %s", to)
			}
			if err := r.p.AddLearner(ctx, to, addr); err != nil {
				return err
			}
			n.log.Info("replica move: new replica added; it catches up before it votes", "group", r.group, "to", to)
			return nil
		}
		if s.Suffrage != raft.Voter {
			// promoteRebuilt makes it a voter once it has caught up.
			return fmt.Errorf("the new replica on %s has not caught up yet", to)
		}
	}
	if _, ok := member(from); from != "" && ok {
		if from == n.cfg.NodeID {
			// handOver gives leadership to the preferred replica first.
			return fmt.Errorf("this node leads the partition it is moving off")
		}
		if err := r.p.RemoveMember(ctx, from); err != nil {
			return err
		}
		n.log.Info("replica move: old replica out of the group", "group", r.group, "from", from)
	}
	done := &clusterv1.FinishMove{Entity: w.entity.GetName(), Incarnation: w.entity.GetIncarnation(), PartitionId: w.id, From: from, To: to}
	err = n.atMetaLeader(ctx, false, func() error {
		_, err := n.meta.propose(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_FinishMove{FinishMove: done}})
		return err
	}, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		_, err := clusterv1.NewNodeServiceClient(conn).FinishMove(ctx, &clusterv1.FinishMoveRequest{Move: done})
		return err
	})
	if err != nil {
		return fmt.Errorf("report the move done: %w", err)
	}
	n.log.Info("replica move done", "group", r.group, "from", from, "to", to)
	return nil
}
