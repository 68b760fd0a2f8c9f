package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/raftbus/raftbus/partition"
)

// A partition nobody uses closes its Raft group on every replica (see
// partition/quiesce.go) and the node keeps only a note of it, a dormant
// replica: no goroutines, no timers, no heartbeats, no engine in memory.
// It opens again when it is needed:
//   - a request for it on this node (locate), which also makes this node
//     stand for election at once, so the request waits milliseconds;
//   - a raft RPC for it from a peer (a vote request of a peer woken by a
//     request, or a leader's entries), through the Mux's Wake hook;
//   - work only a leader does: a newer entity definition to configure, a
//     replica move to drive (reconcile).
//
// A node starting again keeps dormant the replicas that were when it
// stopped (quietFile), so a restart costs nothing for idle partitions.

// DefaultQuiesceAfter is how long a partition must serve no request before
// its replicas close.
const DefaultQuiesceAfter = 30 * time.Second

// quiesceLinger is how long a leader stays open after its quiesce marker
// is committed: its followers learn of the commit with its next
// AppendEntries (within raft's CommitTimeout) and close first, instead of
// electing when it is gone.
const quiesceLinger = 300 * time.Millisecond

// wakeWait bounds how long a request waits for a dormant partition to
// open and elect a leader.
const wakeWait = 3 * time.Second

// quietFile, in a replica's directory, holds the index of the quiesce
// marker the replica closed at, then its dormant's due and generation. At
// start, a replica whose log still ends at that index stays dormant.
const quietFile = "quiet"

// dormant is a replica closed while its partition is quiet.
type dormant struct {
	// generation is the entity generation the engine had applied when
	// it closed: a newer definition needs a leader to configure it.
	generation uint64
	// due is when the partition has work due (Unix ms, 0: none), when this
	// node led it: the node opens it again then (see partition.Due).
	due int64
	// closed is closed once the replica has stopped; woken, set by the
	// first wake, once the replica is open again (or failed to open).
	closed chan struct{}
	woken  chan struct{}
}

// quiesceAfter is how long a partition here must go unused before it
// quiesces; 0: never.
func (n *Node) quiesceAfter() time.Duration {
	switch d := n.cfg.QuiesceAfter; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultQuiesceAfter
	default:
		return d
	}
}

// quiesce has the partition r leads quiesce when it is idle and nothing of
// the node's own leader duties is under way.
func (n *Node) quiesce(r *replica, w wantedReplica) {
	after := n.quiesceAfter()
	if after == 0 || w.move != nil || r.quiescing.Load() || r.transferring.Load() || r.moving.Load() ||
		r.promoting.Load() || r.forwarding.Load() || r.sweeping.Load() || !r.p.IdleFor(after) {
		return
	}
	if r.configured.Load() < w.entity.GetGeneration() {
		return
	}
	n.mu.RLock()
	rebuilding := n.rebuilds[r.group] != nil
	n.mu.RUnlock()
	if rebuilding {
		return
	}
	r.quiescing.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer r.quiescing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.p.Quiesce(ctx, after); err != nil && !partition.IsQuiesceSkipped(err) {
			n.log.Debug("quiesce partition", "group", r.group, "err", err)
		}
	}()
}

// sleepQuiet closes the replicas whose partition has quiesced.
func (n *Node) sleepQuiet() {
	n.mu.RLock()
	var quiet []*replica
	for _, r := range n.replicas {
		if r.p.Quiet(quiesceLinger) {
			quiet = append(quiet, r)
		}
	}
	n.mu.RUnlock()
	for _, r := range quiet {
		n.sleep(r)
	}
}

// sleep closes r and keeps it as a dormant replica. The snapshot first, so
// that it opens again without replaying its log.
func (n *Node) sleep(r *replica) {
	d := &dormant{closed: make(chan struct{})}
	n.mu.Lock()
	if n.replicas[r.group] != r || n.dormant[r.group] != nil {
		n.mu.Unlock()
		return
	}
	delete(n.replicas, r.group)
	n.dormant[r.group] = d
	n.placedVersion++
	n.mu.Unlock()
	d.generation = max(r.configured.Load(), r.appliedGeneration())
	d.due = r.p.Due()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer close(d.closed)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.p.Snapshot(ctx); err != nil {
			n.log.Debug("snapshot before closing a quiet partition", "group", r.group, "err", err)
		}
		index := r.p.QuiesceIndex()
		if err := r.p.Close(); err != nil {
			n.log.Warn("close quiet partition replica", "group", r.group, "err", err)
			return
		}
		path := filepath.Join(n.replicaDir(r.group), quietFile)
		note := fmt.Appendf(nil, "%d %d %d\n", index, d.due, d.generation)
		if err := os.WriteFile(path, note, 0o640); err != nil {
			n.log.Debug("note a quiet replica", "group", r.group, "err", err)
		}
		n.log.Debug("partition replica quiet: closed", "group", r.group)
	}()
}

// startsDormant reports whether the replica of group, not yet open since
// the node started, closed quiet and has had no entry since: it then
// stays closed until needed, or until due (see dormant.due).
func (n *Node) startsDormant(group string) (*dormant, bool) {
	b, err := os.ReadFile(filepath.Join(n.replicaDir(group), quietFile))
	if err != nil {
		return nil, false
	}
	var index uint64
	d := &dormant{closed: make(chan struct{})}
	if _, err := fmt.Sscan(string(b), &index, &d.due, &d.generation); err != nil || index == 0 {
		return nil, false
	}
	g, err := n.nodeLog.Group(group)
	if err != nil {
		return nil, false
	}
	last, err := g.LastIndex()
	return d, err == nil && last == index
}

// addDormant notes group as the dormant replica d, closed already.
func (n *Node) addDormant(group string, d *dormant) {
	close(d.closed)
	n.mu.Lock()
	if n.replicas[group] == nil && n.dormant[group] == nil {
		n.dormant[group] = d
		n.placedVersion++
	}
	n.mu.Unlock()
}

// isDormant reports whether group is a dormant replica here.
func (n *Node) isDormant(group string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.dormant[group] != nil
}

// wake opens the dormant replica of group, standing for election when
// elect is set, and returns it once open: nil when it is not dormant and
// not open, or failed to open.
func (n *Node) wake(group string, elect bool) *replica {
	n.mu.Lock()
	d := n.dormant[group]
	if d == nil {
		r := n.replicas[group]
		n.mu.Unlock()
		return r
	}
	first := d.woken == nil
	if first {
		d.woken = make(chan struct{})
	}
	woken := d.woken
	n.mu.Unlock()
	if first {
		n.open(group, d, elect)
	} else {
		select {
		case <-woken:
		case <-n.stop:
			return nil
		}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.replicas[group]
}

// open is the first wake of d.
func (n *Node) open(group string, d *dormant, elect bool) {
	defer close(d.woken)
	n.wakes.Add(1)
	select {
	case <-d.closed:
	case <-n.stop:
		return
	}
	w, ok := n.desiredFor(group)
	if ok {
		w.elect = elect
		if err := n.openOrRebuild(group, w); err != nil {
			n.log.Error("open quiet partition replica", "group", group, "err", err)
		}
	}
	n.mu.Lock()
	if n.dormant[group] == d {
		delete(n.dormant, group)
		n.placedVersion++
	}
	if r := n.replicas[group]; r != nil && ok {
		r.configured.Store(d.generation)
	}
	n.mu.Unlock()
	if !ok {
		// No longer placed here: the reconciler removes its data.
		n.kickReconciler()
	}
}

// wakeForPeer is the Mux's Wake hook: a peer's raft RPC for a dormant
// replica opens it (the RPC waits for it).
func (n *Node) wakeForPeer(group string) {
	select {
	case <-n.stop:
		return
	default:
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.wake(group, false)
	}()
}

// wakeToServe opens the dormant replica of group for a request and waits
// until the partition has a leader: the replica returned leads, or its
// Leader names who does. Nil when there is no such replica.
func (n *Node) wakeToServe(ctx context.Context, group string) *replica {
	if !n.isDormant(group) {
		return nil
	}
	r := n.wake(group, true)
	if r == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wakeWait)
	defer cancel()
	// Whether it leads, names who does or has no leader yet, locate goes
	// on from the replica's state.
	_ = r.p.AwaitServing(ctx)
	return r
}

// reconcileDormant removes the dormant replicas of partitions no longer
// placed here and opens those with leader work waiting: work come due, a
// newer entity definition (on the preferred node) or a replica move. It
// returns the earliest time work is due on a dormant replica it left
// (Unix ms, 0 for none), and whether it removed or opened any.
func (n *Node) reconcileDormant(desired map[string]wantedReplica, now int64) (nextDue int64, busy bool) {
	n.mu.RLock()
	var gone []string
	due := make(map[string]bool) // the groups to open, and whether to stand for election
	for group, d := range n.dormant {
		w, ok := desired[group]
		switch {
		case !ok:
			gone = append(gone, group)
		case d.woken != nil:
		case d.due != 0 && d.due <= now:
			due[group] = true
		case w.move != nil || (w.entity.GetGeneration() > d.generation && w.preferred == n.cfg.NodeID):
			due[group] = w.preferred == n.cfg.NodeID
		case d.due != 0 && (nextDue == 0 || d.due < nextDue):
			nextDue = d.due
		}
	}
	n.mu.RUnlock()
	busy = len(gone) > 0 || len(due) > 0
	for _, group := range gone {
		n.mu.Lock()
		d := n.dormant[group]
		if d != nil && d.woken == nil {
			delete(n.dormant, group)
			n.placedVersion++
		} else {
			d = nil
		}
		n.mu.Unlock()
		if d == nil {
			continue
		}
		<-d.closed
		n.removeReplicaData(group)
	}
	for group, elect := range due {
		// Whoever has the work stands for election: the node that kept
		// the deadline, or the one that should lead.
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.wake(group, elect)
		}()
	}
	return nextDue, busy
}
