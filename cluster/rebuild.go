package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/internal/atomicfile"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
)

// Rebuilding a damaged replica, as etcd's learners work. A replica whose
// stored state fails a check (found when the node log is replayed, when
// the replica opens, or when a record or snapshot is read) must not vote,
// lead or serve. Nor may it simply start again empty: an empty voter can
// elect a leader that lacks entries it had acknowledged. So:
//
//  1. The node keeps the replica closed and asks the partition's leader to
//     take its vote (DemoteReplica: it stays a non-voter).
//  2. Once the leader has, the node wipes the replica (its group in the
//     node log, its snapshots) and opens it again empty, without
//     bootstrapping: a non-voter that catches up from the leader by
//     snapshot and log.
//  3. The leader makes it a voter again once it has caught up.
//
// A file REBUILD in the replica's directory carries the state across
// restarts: "damaged: <what was found>" until the wipe, "wiped" until the
// replica is a voter again. While it exists the replica never bootstraps.

const rebuildMarkName = "REBUILD"

// promoteLag is how far a rebuilt replica may trail the leader's commit
// index and still be made a voter: it catches up the rest as any
// follower does.
const promoteLag = 1024

// rebuildRetry spaces a damaged replica's requests to be demoted.
const rebuildRetry = time.Second

type rebuildPhase int

const (
	phaseDamaged rebuildPhase = iota + 1
	phaseWiped
)

// rebuildState is a replica being rebuilt (Node.rebuilds, under n.mu).
type rebuildState struct {
	phase  rebuildPhase
	damage string
	// demotedAt is an index of the group's log at or after the leader
	// made this replica a non-voter: a configuration in which it votes
	// counts only once the replica has applied it (partition.VoterSince).
	demotedAt uint64
	// busy is set while a demotion and wipe is under way.
	busy        atomic.Bool
	lastAttempt time.Time // reconciler only
	reported    bool      // the "nothing to rebuild from" error was logged
}

func (n *Node) rebuildMarkPath(group string) string {
	return filepath.Join(n.replicaDir(group), rebuildMarkName)
}

// writeRebuildMark records a replica's rebuild phase durably.
func (n *Node) writeRebuildMark(group, content string) error {
	if err := n.makeReplicaDir(group); err != nil {
		return err
	}
	return atomicfile.Write(n.rebuildMarkPath(group), []byte(content+"\n"), 0o640)
}

// readRebuildMarks finds the replicas a previous run left being rebuilt.
func (n *Node) readRebuildMarks() error {
	marks, err := filepath.Glob(filepath.Join(n.cfg.DataDir, "partitions", "*", rebuildMarkName))
	if err != nil {
		return err
	}
	for _, m := range marks {
		group, ok := groupOfDir(filepath.Dir(m))
		if !ok {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			return fmt.Errorf("cluster: read %s: %w", m, err)
		}
		text := strings.TrimSpace(string(b))
		st := &rebuildState{phase: phaseDamaged, damage: strings.TrimPrefix(text, "damaged: ")}
		if at, ok := strings.CutPrefix(text, "wiped"); ok {
			// "wiped" alone was written before the demotion's index was
			// kept: any configuration in which it votes then counts.
			st.phase, st.damage = phaseWiped, ""
			if at = strings.TrimSpace(at); at != "" {
				if st.demotedAt, err = strconv.ParseUint(at, 10, 64); err != nil {
					return fmt.Errorf("cluster: read %s: %q is not a rebuild phase", m, text)
				}
			}
		}
		n.rebuilds[group] = st
		n.placedVersion++
	}
	return nil
}

// findDamage marks damaged, at start, the replicas the node log found
// damaged, and those it may have lost entirely: every replica directory
// without a record in the log, when the log itself was lost or lost
// records of unknown groups.
func (n *Node) findDamage(logLost bool) error {
	if err := n.readRebuildMarks(); err != nil {
		return err
	}
	rec := n.nodeLog.Recovery()
	damage := make(map[string]string)
	for g, err := range rec.Damaged {
		damage[g] = err.Error()
	}
	if logLost || rec.Unattributed {
		known := make(map[string]bool)
		for _, g := range n.nodeLog.Groups() {
			known[g] = true
		}
		dirs, _ := filepath.Glob(filepath.Join(n.cfg.DataDir, "partitions", "*"))
		for _, d := range dirs {
			group, ok := groupOfDir(d)
			if !ok || known[group] {
				continue
			}
			if logLost {
				damage[group] = "the node log was lost"
			} else {
				damage[group] = "the node log lost records of unknown groups, and this replica has none left"
			}
		}
	}
	for g, what := range damage {
		if st := n.rebuilds[g]; st != nil && st.phase == phaseDamaged {
			continue
		}
		n.log.Error("partition replica damaged: it will not vote, lead or serve until it is rebuilt from the other replicas", "group", g, "damage", what)
		if err := n.writeRebuildMark(g, "damaged: "+what); err != nil {
			return fmt.Errorf("cluster: mark replica %s damaged: %w", g, err)
		}
		n.rebuilds[g] = &rebuildState{phase: phaseDamaged, damage: what}
		n.placedVersion++
	}
	return nil
}

// refuseIfAlone stops a node that has damaged replicas and no other node
// to rebuild them from.
func (n *Node) refuseIfAlone() error {
	var damaged []string
	for g, st := range n.rebuilds {
		if st.phase == phaseDamaged {
			damaged = append(damaged, fmt.Sprintf("%s (%s)", g, st.damage))
		}
	}
	if len(damaged) == 0 {
		return nil
	}
	f := n.meta.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("cluster: metadata configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		// No configuration yet: the node joined, or rebuilt its metadata
		// log, through a peer, and the leader has not sent it one. A
		// single-node cluster always holds itself in its configuration.
		return nil
	}
	for _, s := range servers {
		if string(s.ID) != n.cfg.NodeID {
			return nil
		}
	}
	return fmt.Errorf("cluster: partition replicas on this node are damaged and this single-node cluster holds no other copy to rebuild them from: %s. "+
		"Restore the data dir %s from a backup", strings.Join(damaged, "; "), n.cfg.DataDir)
}

// markDamaged records damage found while the node runs. The reconciler
// closes the replica and rebuilds it.
func (n *Node) markDamaged(group string, err error) {
	n.mu.Lock()
	st := n.rebuilds[group]
	if st != nil && st.phase == phaseDamaged {
		n.mu.Unlock()
		return
	}
	n.rebuilds[group] = &rebuildState{phase: phaseDamaged, damage: err.Error()}
	n.placedVersion++
	n.mu.Unlock()
	n.log.Error("partition replica damaged: it will not vote, lead or serve until it is rebuilt from the other replicas", "group", group, "err", err)
	if werr := n.writeRebuildMark(group, "damaged: "+err.Error()); werr != nil {
		n.log.Error("mark partition replica damaged", "group", group, "err", werr)
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// rebuildPhaseOf returns a replica's rebuild phase, 0 when it is healthy.
func (n *Node) rebuildPhaseOf(group string) (rebuildPhase, string) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if st := n.rebuilds[group]; st != nil {
		return st.phase, st.damage
	}
	return 0, ""
}

// health is what status reports of a replica this node holds.
func (n *Node) health(group string) (raftbusv1.ReplicaHealth, string) {
	switch phase, damage := n.rebuildPhaseOf(group); phase {
	case phaseDamaged:
		return raftbusv1.ReplicaHealth_REPLICA_HEALTH_DAMAGED, damage
	case phaseWiped:
		return raftbusv1.ReplicaHealth_REPLICA_HEALTH_REBUILDING, ""
	}
	return raftbusv1.ReplicaHealth_REPLICA_HEALTH_HEALTHY, ""
}

// damagedOpen returns the open replicas found damaged while they ran.
func (n *Node) damagedOpen() []*replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var out []*replica
	for name, r := range n.replicas {
		if st := n.rebuilds[name]; st != nil && st.phase == phaseDamaged {
			out = append(out, r)
		}
	}
	return out
}

// openOrRebuild opens a replica placed here, or, when it is damaged,
// moves its rebuild on: it asks to be demoted and then wipes it, on a
// goroutine of its own; the next reconciliation opens it.
func (n *Node) openOrRebuild(name string, w wantedReplica) error {
	e, id := w.entity, w.id
	n.mu.RLock()
	st := n.rebuilds[name]
	n.mu.RUnlock()
	if st == nil || st.phase == phaseWiped {
		err := n.openReplica(name, w)
		if errors.Is(err, partition.ErrDamaged) || raftlog.IsDamaged(err) {
			n.markDamaged(name, err)
			return nil
		}
		return err
	}
	if st.busy.Load() || time.Since(st.lastAttempt) < rebuildRetry {
		return nil
	}
	var others []raft.Server
	for _, s := range w.placed {
		if string(s.ID) != n.cfg.NodeID {
			others = append(others, s)
		}
	}
	if len(others) == 0 {
		if !st.reported {
			st.reported = true
			n.log.Error("damaged partition replica has no other replica to be rebuilt from", "group", name, "damage", st.damage)
		}
		return nil
	}
	st.lastAttempt = time.Now()
	st.busy.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer st.busy.Store(false)
		if err := n.demoteAndWipe(name, e, id, others, st); err != nil {
			n.log.Warn("rebuild partition replica: not yet", "group", name, "err", err)
		}
	}()
	return nil
}

// demoteAndWipe has the partition's leader take this replica's vote, then
// wipes the replica and marks it wiped.
func (n *Node) demoteAndWipe(name string, e *clusterv1.Entity, id uint32, others []raft.Server, st *rebuildState) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &clusterv1.DemoteReplicaRequest{EntityPath: e.GetName(), Incarnation: e.GetIncarnation(), PartitionId: id, NodeId: n.cfg.NodeID}
	ctx = routing.NoForward(ctx)
	queue := make([]string, 0, len(others))
	for _, s := range others {
		queue = append(queue, string(s.Address))
	}
	var lastErr error
	demoted := false
	var demotedAt uint64
	for attempt := 0; attempt < 2*len(others)+2 && len(queue) > 0 && !demoted; attempt++ {
		addr := queue[0]
		queue = queue[1:]
		conn, err := n.peers.Get(addr)
		var resp *clusterv1.DemoteReplicaResponse
		if err == nil {
			resp, err = clusterv1.NewNodeServiceClient(conn).DemoteReplica(ctx, req)
		}
		if err == nil {
			demoted, demotedAt = true, resp.GetConfigurationIndex()
			break
		}
		lastErr = err
		if h := apierror.From(err).Leader.GetAddress(); h != "" && h != addr {
			queue = append([]string{h}, queue...)
		}
	}
	if !demoted {
		return fmt.Errorf("no leader took its vote: %w", lastErr)
	}
	n.log.Info("damaged partition replica demoted to non-voter; wiping it to rebuild it from the leader", "group", name)
	select {
	case <-n.stop:
		return errors.New("node stopping")
	default:
	}
	if err := n.nodeLog.DropGroup(name); err != nil {
		return fmt.Errorf("drop its log: %w", err)
	}
	dir := n.replicaDir(name)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, en := range entries {
		if en.Name() == rebuildMarkName || en.Name() == groupFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, en.Name())); err != nil {
			return fmt.Errorf("remove its snapshots: %w", err)
		}
	}
	if err := n.writeRebuildMark(name, fmt.Sprintf("wiped %d", demotedAt)); err != nil {
		return err
	}
	n.mu.Lock()
	st.phase, st.damage, st.demotedAt = phaseWiped, "", demotedAt
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
	return nil
}

// finishRebuilds ends the rebuild of every wiped replica that votes again.
func (n *Node) finishRebuilds() {
	type wipedReplica struct {
		r         *replica
		demotedAt uint64
	}
	n.mu.RLock()
	var wiped []wipedReplica
	for name, st := range n.rebuilds {
		if r := n.replicas[name]; r != nil && st.phase == phaseWiped {
			wiped = append(wiped, wipedReplica{r, st.demotedAt})
		}
	}
	n.mu.RUnlock()
	for _, w := range wiped {
		r := w.r
		if !r.p.VoterSince(n.cfg.NodeID, w.demotedAt) {
			continue
		}
		if err := os.Remove(n.rebuildMarkPath(r.group)); err != nil && !errors.Is(err, os.ErrNotExist) {
			n.log.Warn("remove rebuild mark", "group", r.group, "err", err)
			continue
		}
		n.mu.Lock()
		delete(n.rebuilds, r.group)
		n.placedVersion++
		n.mu.Unlock()
		n.log.Info("partition replica rebuilt: it votes again", "group", r.group)
	}
}

// promoteRebuilt, on the leader of r, makes a non-voter of the placement a
// voter again once it has caught up.
func (n *Node) promoteRebuilt(r *replica, e *clusterv1.Entity, peers []raft.Server) {
	if r.promoting.Load() || time.Since(r.lastPromoteCheck) < rebuildRetry {
		return
	}
	r.lastPromoteCheck = time.Now()
	members, err := r.p.Members()
	if err != nil {
		return
	}
	placed := make(map[raft.ServerID]bool)
	for _, s := range peers {
		placed[s.ID] = true
	}
	var learners []raft.Server
	for _, s := range members {
		if s.Suffrage == raft.Nonvoter && placed[s.ID] {
			learners = append(learners, s)
		}
	}
	if len(learners) == 0 {
		return
	}
	r.promoting.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer r.promoting.Store(false)
		for _, s := range learners {
			ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
			st, err := n.replicaStatus(ctx, e, r.id, string(s.Address))
			cancel()
			if err != nil || st.GetHealth() == raftbusv1.ReplicaHealth_REPLICA_HEALTH_DAMAGED || st.GetAppliedIndex() == 0 {
				continue
			}
			if st.GetAppliedIndex()+promoteLag < r.p.Info().CommitIndex {
				continue
			}
			ctx, cancel = context.WithTimeout(context.Background(), statusTimeout)
			err = r.p.Promote(ctx, string(s.ID), string(s.Address))
			cancel()
			if err != nil {
				n.log.Debug("promote rebuilt replica", "group", r.group, "node", s.ID, "err", err)
				continue
			}
			n.log.Info("rebuilt partition replica caught up: it votes again", "group", r.group, "node", s.ID)
		}
	}()
}

// demote takes the vote from node id's replica of r, which this node
// leads (DemoteReplica).
func (n *Node) demote(r *replica, id string) (uint64, error) {
	if id == n.cfg.NodeID {
		return 0, apierror.Invalid("a leader does not demote itself")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	index, err := r.p.Demote(ctx, id, n.nodeAddrs()[id])
	switch {
	case errors.Is(err, partition.ErrNotMember):
		return 0, apierror.NotFound("node %s is not a member", id)
	case partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED:
		return 0, apierror.From(err)
	case err != nil:
		return 0, apierror.Busy("partition %s: demote %s: %v", r.group, id, err)
	}
	n.log.Warn("partition replica demoted to non-voter to be rebuilt: its node found it damaged", "group", r.group, "node", id)
	return index, nil
}

// forgetDeleted drops from the node log, and from disk, the groups of
// entities deleted while this node was not running them: a replica being
// rebuilt (closed) when its entity went, or one whose node stopped between
// closing it and dropping its log. Nothing else would ever drop them, and
// a group left in the log pins its segments. A group is known deleted when
// the metadata this node applied is past the index that created it and
// holds no entity of that incarnation.
func (n *Node) forgetDeleted(desired func(group string) bool) {
	applied := n.meta.raft.AppliedIndex()
	candidates := n.nodeLog.Groups()
	n.mu.RLock()
	for g := range n.rebuilds {
		candidates = append(candidates, g)
	}
	n.mu.RUnlock()
	for _, g := range candidates {
		if desired(g) {
			continue
		}
		n.mu.RLock()
		_, open := n.replicas[g]
		n.mu.RUnlock()
		entity, incarnation, ok := parseGroupName(g)
		if open || !ok || applied <= incarnation {
			continue
		}
		if e := n.meta.fsm.Entity(entity); e != nil && e.GetIncarnation() == incarnation {
			continue
		}
		if err := n.nodeLog.DropGroup(g); err != nil {
			n.log.Warn("drop the log of a deleted entity's replica", "group", g, "err", err)
			continue
		}
		if err := os.RemoveAll(n.replicaDir(g)); err != nil {
			n.log.Warn("remove a deleted entity's replica", "group", g, "err", err)
		}
		n.mu.Lock()
		delete(n.rebuilds, g)
		n.placedVersion++
		n.mu.Unlock()
		n.log.Info("partition replica of a deleted entity removed", "group", g)
	}
}

// parseGroupName splits a group name (see groupName) into its entity and
// incarnation.
func parseGroupName(g string) (entity string, incarnation uint64, ok bool) {
	at, slash := strings.LastIndex(g, "@"), strings.LastIndex(g, "/")
	if at < 0 || slash < at {
		return "", 0, false
	}
	inc, err := strconv.ParseUint(g[at+1:slash], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return g[:at], inc, true
}
