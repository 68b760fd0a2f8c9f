package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// reconcileInterval bounds how long a new partition leader may go before it
// configures its engine; metadata changes trigger reconciliation at once.
const reconcileInterval = 200 * time.Millisecond

// forgetInterval spaces the looks for replicas of deleted entities left in
// the node log.
const forgetInterval = 10 * time.Second

// replica is one partition replica this node runs.
type replica struct {
	group  string
	entity string
	id     uint32
	p      *partition.Partition
	// configured is the entity generation this node last committed to the
	// partition's engine while leading it; 0 until the first.
	configured atomic.Uint64
	// hasEntity caches that the engine was seen with the entity.
	hasEntity atomic.Bool
	// preferred is the node that should lead the partition (the first of
	// its placement), lastTransfer when this node last handed it over.
	preferred    atomic.Pointer[string]
	transferring atomic.Bool
	lastTransfer time.Time // reconciler only
	// promoting is set while this node, as leader, checks whether rebuilt
	// replicas have caught up (promoteRebuilt).
	promoting        atomic.Bool
	lastPromoteCheck time.Time // reconciler only
	// moving is set while this node, as leader, takes a step of the
	// partition's replica move (advanceMove).
	moving       atomic.Bool
	lastMoveStep time.Time // reconciler only
	// forwarding is set while this node, as leader, runs the partition's
	// forwarder (see forwarder.go).
	forwarding atomic.Bool
	// sweeping is set while this node, as leader, has the partition forget
	// the marks of deleted sources (see marksweep.go).
	sweeping  atomic.Bool
	lastSweep time.Time // reconciler only
	// quiescing is set while this node, as leader, proposes the
	// partition's quiesce marker (see quiesce.go).
	quiescing atomic.Bool
}

func (r *replica) setPreferred(id string) { r.preferred.Store(&id) }

func (r *replica) preferredNode() string {
	if p := r.preferred.Load(); p != nil {
		return *p
	}
	return ""
}

// ready reports whether the partition's engine has the entity: this node
// configured it as leader, or a leader before it did.
func (r *replica) ready() bool {
	if r.configured.Load() > 0 || r.hasEntity.Load() {
		return true
	}
	r.p.ReadApplied(func(e *engine.Engine) {
		_, err := e.RuntimeProperties(r.entity)
		r.hasEntity.Store(err == nil)
	})
	return r.hasEntity.Load()
}

// appliedGeneration is the metadata generation the partition's engine was
// last configured from, by whichever leader, as far as this replica has
// applied.
func (r *replica) appliedGeneration() uint64 {
	var g uint64
	r.p.ReadApplied(func(e *engine.Engine) { g = e.Generation(r.entity) })
	return g
}

// groupName is the Raft group id of a partition: entity, incarnation and
// partition id, so that a queue deleted and created again never meets the
// replicas of the old one.
func groupName(e *clusterv1.Entity, id uint32) string {
	return string(appendGroupName(nil, e, id))
}

// appendGroupName appends groupName(e, id) to b.
func appendGroupName(b []byte, e *clusterv1.Entity, id uint32) []byte {
	b = append(b, e.GetName()...)
	b = append(b, '@')
	b = strconv.AppendUint(b, e.GetIncarnation(), 10)
	b = append(b, '/')
	return strconv.AppendUint(b, uint64(id), 10)
}

// replica returns this node's replica of a partition, or nil. A receive
// across partitions looks up every partition several times, so the key is
// built without allocating (fmt.Sprintf here was 2 % of a node's CPU at
// 16 partitions).
func (n *Node) replica(e *clusterv1.Entity, id uint32) *replica {
	var buf [128]byte
	key := appendGroupName(buf[:0], e, id)
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.replicas[string(key)]
}

// runReconciler keeps the replicas this node runs in line with the
// metadata: it opens the partitions placed here, closes (and deletes) those
// of deleted entities, and as leader configures each partition's engine.
func (n *Node) runReconciler() {
	defer n.wg.Done()
	tick := time.NewTicker(reconcileInterval)
	defer tick.Stop()
	for {
		changed := n.meta.fsm.Changes()
		n.reconcile()
		select {
		case <-n.stop:
			return
		case <-changed:
		case <-n.kick:
		case <-tick.C:
		}
	}
}

// kickReconciler makes the reconciler run now rather than at its next tick.
func (n *Node) kickReconciler() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) reconcile() {
	defer n.rounds.Add(1)
	desired, version := n.desiredVersioned()
	now := n.cfg.Clock.Now().UnixMilli()

	// A round looks over every partition placed here only when what it
	// would find may differ from what the last such look found nothing to
	// do in: the metadata or the set of replicas changed, dormant work
	// came due, or a while has passed. With thousands of quiet partitions
	// the look was most of an idle node's CPU; the other rounds (a
	// replica that took the lead kicks one) see the open replicas only.
	n.mu.RLock()
	key := placedKey{desired: version, placed: n.placedVersion}
	full := key != n.settled || (n.nextDue != 0 && n.nextDue <= now) || time.Since(n.lastLook) > forgetInterval
	var toClose []*replica
	for name, r := range n.replicas {
		if _, ok := desired[name]; !ok {
			toClose = append(toClose, r)
		}
	}
	var toOpen []string
	if full {
		for name := range desired {
			if n.replicas[name] == nil && n.dormant[name] == nil {
				toOpen = append(toOpen, name)
			}
		}
	}
	n.mu.RUnlock()

	for _, r := range toClose {
		n.closeReplica(r, true)
	}
	if full {
		n.looks.Add(1)
		nextDue, busy := n.reconcileDormant(desired, now)
		n.settled, n.nextDue, n.lastLook = placedKey{}, nextDue, time.Now()
		if len(toClose) == 0 && len(toOpen) == 0 && !busy {
			n.settled = key
		}
	}
	if time.Since(n.lastForget) > forgetInterval {
		n.lastForget = time.Now()
		n.forgetDeleted(func(g string) bool { _, ok := desired[g]; return ok })
	}
	restarted := make(map[string]bool)
	for _, r := range append(n.damagedOpen(), n.wedgedOpen()...) {
		if !restarted[r.group] {
			restarted[r.group] = true
			n.closeReplica(r, false)
			toOpen = append(toOpen, r.group)
		}
	}
	for _, name := range toOpen {
		w, ok := desired[name]
		if !ok {
			continue
		}
		if phase, _ := n.rebuildPhaseOf(name); !restarted[name] && phase == 0 {
			if d, ok := n.startsDormant(name); ok {
				n.addDormant(name, d)
				continue
			}
		}
		if err := n.openOrRebuild(name, w); err != nil {
			n.log.Error("open partition replica", "group", name, "err", err)
		}
	}
	n.finishRebuilds()

	n.mu.RLock()
	var leading []*replica
	for _, r := range n.replicas {
		if r.p.IsLeader() {
			leading = append(leading, r)
		}
	}
	n.mu.RUnlock()
	for _, r := range leading {
		w, ok := desired[r.group]
		if !ok {
			continue
		}
		e := w.entity
		r.setPreferred(w.preferred)
		if gen := e.GetGeneration(); r.configured.Load() < gen {
			if applied := r.appliedGeneration(); applied > gen {
				// An earlier leader configured the partition from a newer
				// view of the metadata than this node has: the engine
				// would refuse commands made from this one. Wait for the
				// view to catch up.
				n.log.Debug("metadata view behind the partition's configuration", "group", r.group, "view", gen, "applied", applied)
				continue
			}
			if err := n.configure(r, e); err != nil {
				n.log.Debug("configure partition", "group", r.group, "err", err)
			}
			continue
		}
		n.forward(r, e)
		n.sweepMarks(r)
		n.promoteRebuilt(r, e, w.placed)
		n.advanceMove(r, w)
		n.handOver(r)
		n.quiesce(r, w)
	}
	n.sleepQuiet()
}

// transferInterval spaces the attempts to hand a partition to its
// preferred leader, so that a preferred node that is down costs little;
// transferTimeout bounds one attempt.
const (
	transferInterval = 5 * time.Second
	transferTimeout  = 10 * time.Second
)

// handOver gives leadership of r to its preferred node when another node
// leads it. Placement starts each partition's replica list at a different
// node, so preferred leaders are spread evenly, and leadership flows back
// to a node when it returns. The partition starts no transfer to a node
// that is out of touch or behind (see partition.HandOver): leadership
// stays here until the node has caught up.
func (n *Node) handOver(r *replica) {
	preferred := r.preferredNode()
	if preferred == n.cfg.NodeID || r.transferring.Load() || time.Since(r.lastTransfer) < transferInterval {
		return
	}
	// Never to a node whose clock is known to be off (it would refuse to
	// serve and hand the partition back), nor to a non-voter being rebuilt.
	if !n.clocks.mayLead(preferred) || r.p.Suffrage(preferred) != raft.Voter {
		return
	}
	r.lastTransfer = time.Now()
	r.transferring.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer r.transferring.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
		defer cancel()
		if err := r.p.HandOver(ctx, preferred); err != nil {
			n.log.Debug("leadership transfer", "group", r.group, "to", preferred, "err", err)
			return
		}
		n.log.Info("leadership handed to the preferred leader", "group", r.group, "to", preferred)
	}()
}

// transferWedged is how long a leader's proposals may be refused for a
// leadership transfer before its node restarts the replica: a transfer
// takes about two election timeouts, and one raft never ends must not
// take the partition down for good (see partition/handover.go).
const transferWedged = 30 * time.Second

// wedgedOpen returns the replicas whose leadership transfer raft will
// never end.
func (n *Node) wedgedOpen() []*replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var wedged []*replica
	for _, r := range n.replicas {
		if d := r.p.TransferStuckFor(); d > transferWedged {
			n.log.Error("a leadership transfer has refused every write for too long: restarting the replica",
				"group", r.group, "for", d.Round(time.Second))
			wedged = append(wedged, r)
		}
	}
	return wedged
}

func (n *Node) openReplica(name string, w wantedReplica) error {
	e, id := w.entity, w.id
	transport, err := n.mux.Transport(name)
	if err != nil {
		return err
	}
	g, err := n.nodeLog.Group(name)
	if err != nil {
		transport.Close()
		return err
	}
	if err := n.makeReplicaDir(name); err != nil {
		transport.Close()
		return fmt.Errorf("create the replica's directory: %w", err)
	}
	bootstrap := w.bootstrap
	if phase, _ := n.rebuildPhaseOf(name); phase == phaseWiped {
		// A rebuilt replica joins as the non-voter the leader made it.
		bootstrap = nil
	}
	p, err := partition.Open(partition.Config{
		Name:           name,
		PartitionID:    id,
		PartitionCount: uint32(len(e.GetPartitions())),
		NodeID:         n.cfg.NodeID,
		Dir:            n.replicaDir(name),
		Log:            g,
		Stable:         g,
		OnDamage:       func(err error) { n.markDamaged(name, err) },
		Transport:      transport,
		Clock:          n.clocks.bounded,
		Bootstrap:      bootstrap,
		Campaign:       w.preferred == n.cfg.NodeID,
		Elect:          w.elect,
		// A new leader configures its partition's engine from the
		// metadata (reconcile) before it serves: now, not at the next tick.
		OnLeading:          n.kickReconciler,
		HeartbeatTimeout:   n.raftTimes(partition.DefaultHeartbeatTimeout),
		ElectionTimeout:    n.raftTimes(partition.DefaultElectionTimeout),
		LeaderLeaseTimeout: n.raftTimes(partition.DefaultLeaderLeaseTimeout),
		Logger:             n.log,
		Observer:           n.metrics,
	})
	if err != nil {
		transport.Close()
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.stop:
		p.Close()
		return nil
	default:
	}
	r := &replica{group: name, entity: e.GetName(), id: id, p: p}
	r.setPreferred(w.preferred)
	n.replicas[name] = r
	n.placedVersion++
	n.log.Info("partition replica opened", "group", name)
	return nil
}

// replicaDir is where a replica keeps its snapshots and rebuild mark: the
// group name, escaped, where that makes a file name. Entity names run to
// 260 characters and '/' escapes to three, past the 255 bytes file
// systems allow, so a longer name is cut and a hash of the whole added; its
// group name is then kept in a file inside (see makeReplicaDir).
func (n *Node) replicaDir(group string) string {
	return filepath.Join(n.cfg.DataDir, "partitions", replicaDirName(group))
}

// maxDirName is the longest replica directory name, well under the limit.
const maxDirName = 200

// groupFile names the group of a replica directory whose name is cut.
const groupFile = "group"

func replicaDirName(group string) string {
	name := url.PathEscape(group)
	if len(name) <= maxDirName {
		return name
	}
	sum := sha256.Sum256([]byte(group))
	return name[:maxDirName-33] + "-" + hex.EncodeToString(sum[:16])
}

// makeReplicaDir creates group's replica directory, with the file that
// names its group when the directory's name cannot.
func (n *Node) makeReplicaDir(group string) error {
	dir := n.replicaDir(group)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if replicaDirName(group) == url.PathEscape(group) {
		return nil
	}
	if b, err := os.ReadFile(filepath.Join(dir, groupFile)); err == nil && string(b) == group {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, groupFile), []byte(group), 0o640)
}

// groupOfDir is the group whose replica directory is dir.
func groupOfDir(dir string) (string, bool) {
	if b, err := os.ReadFile(filepath.Join(dir, groupFile)); err == nil {
		return string(b), true
	}
	group, err := url.PathUnescape(filepath.Base(dir))
	return group, err == nil
}

// closeReplica stops a replica; remove deletes its data too (the entity is
// gone).
func (n *Node) closeReplica(r *replica, remove bool) {
	n.mu.Lock()
	delete(n.replicas, r.group)
	n.placedVersion++
	n.mu.Unlock()
	if err := r.p.Close(); err != nil {
		n.log.Warn("close partition replica", "group", r.group, "err", err)
		if remove {
			// Raft may still write the group: leave its log and data to
			// the next start, which forgets replicas of deleted entities.
			return
		}
	}
	if remove {
		n.removeReplicaData(r.group)
	}
}

// removeReplicaData deletes what a closed replica of a deleted entity
// kept: its log and its directory.
func (n *Node) removeReplicaData(group string) {
	// The log first: a replica directory left behind by a crash in
	// between is harmless, a group left in the log would pin it.
	if err := n.nodeLog.DropGroup(group); err != nil {
		n.log.Warn("drop partition log", "group", group, "err", err)
	}
	if err := os.RemoveAll(n.replicaDir(group)); err != nil {
		n.log.Warn("remove partition data", "group", group, "err", err)
	}
	n.log.Info("partition replica removed", "group", group)
}

// configure commits the entity's settings to the partition's engine: a
// queue's, or a topic's with its subscriptions and their rules. Every
// command carries e's generation, so the engine refuses them when a newer
// definition was applied already (this node's view of the metadata may be
// behind that of the partition's previous leader).
func (n *Node) configure(r *replica, e *clusterv1.Entity) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	switch e.GetKind() {
	case clusterv1.EntityKind_ENTITY_KIND_TOPIC:
		err = n.configureTopic(ctx, r, e)
	default:
		q := e.GetQueue()
		err = apply(ctx, r, &enginev1.ConfigureEntity{
			EntityPath:   e.GetName(),
			Properties:   q,
			MaxSizeBytes: q.GetMaxSizeInMegabytes() << 20 / int64(len(e.GetPartitions())),
			Generation:   e.GetGeneration(),
		})
	}
	if err != nil {
		return err
	}
	r.configured.Store(e.GetGeneration())
	return nil
}

func apply(ctx context.Context, r *replica, c *enginev1.ConfigureEntity) error {
	_, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: c}})
	return err
}

// configureTopic brings the topic's slice in this partition in line with
// the metadata: the topic's settings, subscriptions created, updated or
// deleted, and each subscription's rules added or removed by name (a
// changed rule is removed and added again). Every step is idempotent, so a
// new leader simply runs it again.
func (n *Node) configureTopic(ctx context.Context, r *replica, e *clusterv1.Entity) error {
	t, gen := e.GetTopic(), e.GetGeneration()
	err := apply(ctx, r, &enginev1.ConfigureEntity{
		EntityPath:   e.GetName(),
		Topic:        t,
		MaxSizeBytes: t.GetMaxSizeInMegabytes() << 20 / int64(len(e.GetPartitions())),
		Generation:   gen,
	})
	if err != nil {
		return err
	}
	var have []string
	rules := make(map[string][]*raftbusv1.RuleProperties)
	r.p.ReadApplied(func(en *engine.Engine) {
		have, _ = en.Subscriptions(e.GetName())
		for _, path := range have {
			rules[path], _ = en.Rules(path)
		}
	})
	want := make(map[string]bool)
	for _, sub := range e.GetSubscriptions() {
		path := meta.SubscriptionPath(e.GetName(), sub.GetProperties().GetSubscriptionName())
		want[path] = true
		cfg := &enginev1.ConfigureEntity{EntityPath: path, Subscription: sub.GetProperties(), Generation: gen}
		if _, exists := rules[path]; !exists {
			cfg.Rules = sub.GetRules()
		}
		if err := apply(ctx, r, cfg); err != nil {
			return err
		}
		if err := n.syncRules(ctx, r, gen, path, rules[path], sub.GetRules()); err != nil {
			return err
		}
	}
	for _, path := range have {
		if !want[path] {
			if err := apply(ctx, r, &enginev1.ConfigureEntity{EntityPath: path, Delete: true, Generation: gen}); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncRules turns a subscription's rules in the engine (have, nil for a
// subscription just created with want) into want, the rules of metadata
// generation gen.
func (n *Node) syncRules(ctx context.Context, r *replica, gen uint64, path string, have, want []*raftbusv1.RuleProperties) error {
	if have == nil {
		return nil
	}
	wanted := make(map[string]*raftbusv1.RuleProperties)
	for _, w := range want {
		wanted[w.GetName()] = w
	}
	present := make(map[string]bool)
	for _, h := range have {
		w, ok := wanted[h.GetName()]
		if ok && proto.Equal(stripTime(w), stripTime(h)) {
			present[h.GetName()] = true
			continue
		}
		_, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_RemoveRule{RemoveRule: &enginev1.RemoveRule{EntityPath: path, RuleName: h.GetName(), Generation: gen}}})
		if err != nil {
			return err
		}
	}
	for _, w := range want {
		if present[w.GetName()] {
			continue
		}
		_, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_AddRule{AddRule: &enginev1.AddRule{EntityPath: path, Rule: w, Generation: gen}}})
		if err != nil {
			return err
		}
	}
	return nil
}

// stripTime is a rule without its creation time, for comparing what a rule
// does.
func stripTime(r *raftbusv1.RuleProperties) *raftbusv1.RuleProperties {
	c := proto.Clone(r).(*raftbusv1.RuleProperties)
	c.CreatedAt = nil
	return c
}
