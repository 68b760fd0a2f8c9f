package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/internal/sas"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// metaGroupName is the Raft group id of the metadata group.
const metaGroupName = "meta"

// joinTimeout bounds how long a new node keeps asking to be let in.
const joinTimeout = 30 * time.Second

// Byte limits of the metadata group, as partition/limits.go sets them for
// partitions: a metadata command (one entity change) is at most
// maxMetaCommandBytes, and an AppendEntries request carries at most
// metaMaxAppendEntries of them, with what the transport adds, well under
// MaxMessageBytes.
const (
	maxMetaCommandBytes       = 256 << 10
	metaMaxAppendEntries      = 64
	maxMetaAppendEntriesBytes = metaMaxAppendEntries*(maxMetaCommandBytes+64) + 4<<10
)

// The AppendEntries requests of partitions and of the metadata group fit
// in a gRPC message between nodes: these do not compile (they overflow
// uint) otherwise.
const (
	_ = uint(MaxMessageBytes - partition.MaxAppendEntriesBytes)
	_ = uint(MaxMessageBytes - maxMetaAppendEntriesBytes)
)

// metaGroup is this node's member of the metadata Raft group.
type metaGroup struct {
	n     *Node
	fsm   *meta.FSM
	raft  *raft.Raft
	store failStopStore
	snaps *partition.Snapshots
	// transport is closed as Raft shuts down, so no RPC is waited out.
	transport raft.Transport
	// followers is what this node, leading, sees of the other members
	// (see partition.HandOver).
	followers *partition.Followers
	// readyTerm is the term in which this node, as leader, has applied
	// every entry committed before its election (see confirmLeadership).
	readyTerm atomic.Uint64
	// snapshots counts the snapshots taken, for metrics.
	snapshots atomic.Uint64
}

func openMetaGroup(n *Node) (*metaGroup, error) {
	dir := filepath.Join(n.cfg.DataDir, metaDirName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: create %s: %w", dir, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: open metadata log in %s (is another raftbusd using this data dir?): %w", dir, err)
	}
	stored := newFailStopStore(store, func(err error) {
		select {
		case <-n.stop: // closing: the store may be closed under a late write
			return
		default:
		}
		n.fail(fmt.Errorf("cluster: the metadata log in %s failed a write (%w); this node can take no more part in the cluster's metadata. "+
			"Check the disk under %s (full, read-only, failing) and start the node again: "+
			"it recovers the metadata log up to its last synced write and catches up from the other nodes", dir, err, dir))
	})
	logs, stable := checkedLog{stored}, checkedStable{stored}
	if err := logs.verify(); err != nil {
		store.Close()
		return nil, metaDamaged(dir, err)
	}
	if err := readGuarded(func() error { _, err := readVotes(stable); return err }); err != nil {
		store.Close()
		return nil, metaDamaged(dir, err)
	}
	transport, err := n.mux.Transport(metaGroupName)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: metadata transport: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.HeartbeatTimeout = n.raftTimes(partition.DefaultHeartbeatTimeout)
	rc.ElectionTimeout = n.raftTimes(partition.DefaultElectionTimeout)
	rc.LeaderLeaseTimeout = n.raftTimes(partition.DefaultLeaderLeaseTimeout)
	rc.MaxAppendEntries = metaMaxAppendEntries
	g := &metaGroup{n: n, fsm: meta.NewFSM(), store: stored, transport: transport, followers: partition.NewFollowers()}
	g.raft, g.snaps, err = partition.StartGroup(partition.Group{
		Name: metaGroupName, NodeID: n.cfg.NodeID, Dir: dir,
		Log: logs, Stable: stable, Transport: transport, FSM: countingFSM{g.fsm, &g.snapshots},
		Logger: n.log, Config: rc, Followers: g.followers,
		OnDamage: func(err error) { n.log.Error("the metadata group's snapshot is damaged", "err", err) },
	})
	if err != nil {
		transport.Close()
		store.Close()
		if errors.Is(err, partition.ErrDamaged) {
			return nil, metaDamaged(dir, err)
		}
		return nil, fmt.Errorf("cluster: start metadata group: %w", err)
	}
	return g, nil
}

// metaShutdownTimeout bounds how long a node waits for the metadata
// group's Raft to stop.
const metaShutdownTimeout = 10 * time.Second

// close stops the metadata group. Like partition.Close it closes the
// transport first, so that Raft waits out no RPC, and bounds the wait for
// Raft; the log stays open when Raft has not stopped by then.
func (g *metaGroup) close() {
	if err := partition.StopGroup(g.raft, g.transport, metaShutdownTimeout); err != nil {
		g.n.log.Warn("metadata group did not shut down; its log stays open", "err", err)
		return
	}
	if g.store.faulted.Load() {
		g.n.log.Warn("the metadata log faulted in a write; it stays open, its lock perhaps held")
		return
	}
	g.store.Close()
}

// metaDamagedError is what openMetaGroup returns when the metadata log or
// snapshot in Dir fails its checks: the node rebuilds it from the other
// nodes (see rebuildMeta), or cannot start.
type metaDamagedError struct {
	Dir string
	Err error
}

func (e *metaDamagedError) Error() string {
	return fmt.Sprintf("cluster: the metadata log in %s is damaged (%v)", e.Dir, e.Err)
}

func (e *metaDamagedError) Unwrap() error { return e.Err }

func metaDamaged(dir string, err error) error { return &metaDamagedError{Dir: dir, Err: err} }

// await waits for a Raft future of the node's groups (see
// partition.Await), giving up when ctx ends or the node stops.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	return partition.Await(ctx, n.stop, f)
}

// joinOrBootstrap makes a node with no metadata state a member: it forms a
// cluster from the configured peers (or alone), or asks a running node to
// let it join: the join address, or formed, a peer that answered as a
// member of a cluster formed already. A node with state just resumes.
func (g *metaGroup) joinOrBootstrap(formed string) error {
	cfg := g.n.cfg
	has, err := raft.HasExistingState(g.store, checkedStable{g.store}, g.snaps)
	if err != nil {
		return fmt.Errorf("cluster: read metadata state: %w", err)
	}
	if has {
		return nil
	}
	if cfg.Join != "" {
		return g.join(cfg.Join)
	}
	if formed != "" {
		g.n.log.Info("the peers have formed a cluster already: joining it", "via", formed)
		return g.join(formed)
	}
	// A member that lost its metadata log must not form a cluster of its
	// own from the peer list: it would start over with none of the
	// cluster's metadata, and could vote as if it never had any.
	if id := g.n.ident.record().ClusterID; id != "" {
		return fmt.Errorf("cluster: this node has been a member of cluster %s (node.json in %s) but holds no metadata log, "+
			"so it can only come back through a running member, and none of its peers answered: start it again once they run", id, cfg.DataDir)
	}
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = map[string]string{cfg.NodeID: g.n.addr}
	}
	if _, ok := peers[cfg.NodeID]; !ok {
		return fmt.Errorf("cluster: the peer list does not name this node (%s)", cfg.NodeID)
	}
	var servers []raft.Server
	for id, addr := range peers {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	err = g.n.await(ctx, g.raft.BootstrapCluster(raft.Configuration{Servers: servers}))
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	return nil
}

func (g *metaGroup) join(addr string) error {
	if err := g.n.join(addr, false); err != nil {
		return err
	}
	g.n.log.Info("joined the cluster", "via", addr)
	return nil
}

// join asks the metadata leader, through the node at addr, to let this
// node in (Join), retrying while a retry may help, for joinTimeout.
// With rebuild it asks instead to rebuild its metadata log (see
// rebuildMeta).
func (n *Node) join(addr string, rebuild bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	rec := n.ident.record()
	req := &clusterv1.JoinRequest{NodeId: n.cfg.NodeID, Address: n.addr, Incarnation: rec.Incarnation, ClusterId: rec.ClusterID, RebuildMetadata: rebuild}
	var lastErr error
	for attempt := 0; ; attempt++ {
		conn, err := n.peers.Get(addr)
		if err == nil {
			_, err = clusterv1.NewNodeServiceClient(conn).Join(ctx, req)
			if err == nil {
				return nil
			}
		}
		lastErr = err
		if e := apierror.From(err); !e.Retryable && e.Reason != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			return fmt.Errorf("cluster: join via %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: join via %s: gave up after %v: %w", addr, joinTimeout, lastErr)
		case <-time.After(routing.Backoff(attempt)):
		}
	}
}

func (g *metaGroup) isLeader() bool { return g.raft.State() == raft.Leader }

func (g *metaGroup) leaderAddr() string {
	addr, _ := g.raft.LeaderWithID()
	return string(addr)
}

// propose commits one metadata command; only on the leader.
func (g *metaGroup) propose(ctx context.Context, cmd *clusterv1.MetaCommand) (*clusterv1.MetaResult, error) {
	cmd.NowUnixMs = g.n.cfg.Clock.Now().UnixMilli()
	b, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode metadata command: %w", err)
	}
	if len(b) > maxMetaCommandBytes {
		return nil, apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED,
			"the definition is %d bytes encoded; a metadata change may be at most %d", len(b), maxMetaCommandBytes)
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	f := g.raft.Apply(b, timeout)
	if err := g.n.await(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return nil, g.notLeader()
		}
		return nil, apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "metadata change: %v; it may or may not have taken effect", err)
	}
	res := f.Response().(*clusterv1.MetaResult)
	if res.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		return nil, apierror.Errorf(res.GetErrorReason(), "%s", res.GetErrorMessage())
	}
	return res, nil
}

// announceCommit tells the followers now that the last change committed.
// Raft tells them of a commit with the next entry, or an idle
// AppendEntries after its CommitTimeout (50 to 100 ms): an entity created
// would wait that long for its replicas on the other nodes. A barrier is
// such a next entry. Nothing waits for it.
func (g *metaGroup) announceCommit() {
	g.raft.Barrier(announceTimeout)
}

// announceTimeout bounds how long announceCommit waits for raft to take
// the barrier.
const announceTimeout = 100 * time.Millisecond

// confirmLeadership makes a read of this node's metadata linearizable: it
// confirms, after the read began, that this node still leads the metadata
// group with every acknowledged change applied. A leader that has been
// deposed without noticing yet (paused, or cut off with its Raft loop
// stuck) cannot confirm, so it answers NOT_LEADER or SERVER_BUSY instead
// of stale state.
//
// It is the read-index protocol as hashicorp/raft allows it. Once per term
// a barrier (an entry of this term) is applied: then every entry committed
// by earlier leaders is applied too. Then VerifyLeader asks a quorum
// whether this node still leads. Every change this leader acknowledged was
// applied to its state before it was acknowledged (propose waits for the
// FSM), so a state read after both holds every change acknowledged before
// the read began. (Waiting for raft's AppliedIndex to reach the commit
// index would add nothing: raft advances it when it hands entries to the
// FSM, not when the FSM has applied them.)
func (g *metaGroup) confirmLeadership(ctx context.Context) error {
	if !g.isLeader() {
		return g.notLeader()
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	term := g.raft.CurrentTerm()
	if g.readyTerm.Load() != term {
		if err := g.await(ctx, func() raft.Future { return g.raft.Barrier(catchUpTimeout) }); err != nil {
			return g.unconfirmed(err)
		}
		g.readyTerm.Store(term)
	}
	if err := g.await(ctx, g.raft.VerifyLeader); err != nil {
		return g.unconfirmed(err)
	}
	return nil
}

// await waits for the future start returns, giving up when ctx ends.
// start runs on its own goroutine: raft hands a future to its main loop
// through an unbuffered channel, so even asking can block while that loop
// is stuck (a stalled disk); the goroutine ends when raft answers or
// shuts down.
func (g *metaGroup) await(ctx context.Context, start func() raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- start().Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unconfirmed is the answer to a read whose leadership check failed.
func (g *metaGroup) unconfirmed(err error) *apierror.Error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || !g.isLeader() {
		return g.notLeader()
	}
	return apierror.Busy("this node could not confirm that it still leads the metadata group: %v", err)
}

func (g *metaGroup) notLeader() *apierror.Error {
	addr, id := g.raft.LeaderWithID()
	if id == "" {
		return apierror.Busy("the metadata group has no leader yet")
	}
	e := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "this node does not lead the metadata group; %s at %s does", id, addr)
	e.Leader = &raftbusv1.LeaderHint{NodeId: string(id), Address: string(addr)}
	return e
}

// ensureMembers records every voter of the metadata group as a member, and
// names the cluster, once this node leads. Bootstrapped voters are known to
// Raft before they are members; entities are placed only on members.
func (g *metaGroup) ensureMembers(ctx context.Context) error {
	var clusterID string
	var hasRoot bool
	known := make(map[string]string)
	g.fsm.View(func(s *clusterv1.MetaSnapshot) {
		clusterID = s.ClusterId
		hasRoot = meta.FindPolicy(s, "", meta.RootPolicyName) != nil
		for _, m := range s.Nodes {
			known[m.NodeId] = m.Address
		}
	})
	if clusterID == "" {
		cmd := &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_SetClusterId{SetClusterId: &clusterv1.SetClusterID{ClusterId: identity.NewUUID()}}}
		if _, err := g.propose(ctx, cmd); err != nil {
			return err
		}
	}
	if !hasRoot {
		// The cluster's first policy, so that access policies can be
		// turned on (--auth) without a way in being needed first; its
		// keys are written to every node's data dir (see rootkey.go).
		cmd := &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutAccessPolicy{PutAccessPolicy: &clusterv1.PutAccessPolicy{
			Create: true,
			Policy: &raftbusv1.AccessPolicy{
				Name: meta.RootPolicyName, PrimaryKey: sas.NewKey(), SecondaryKey: sas.NewKey(),
				Rights: []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE, raftbusv1.AccessRight_ACCESS_RIGHT_SEND, raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN},
			},
		}}}
		if _, err := g.propose(ctx, cmd); err != nil && apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS {
			return err
		}
	}
	f := g.raft.GetConfiguration()
	if err := g.n.await(ctx, f); err != nil {
		return fmt.Errorf("cluster: metadata configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		if known[string(s.ID)] == string(s.Address) {
			continue
		}
		cmd := &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_AddNode{AddNode: &clusterv1.AddNode{
			Node: &clusterv1.Node{NodeId: string(s.ID), Address: string(s.Address)},
		}}}
		if _, err := g.propose(ctx, cmd); err != nil {
			return err
		}
	}
	return nil
}

// addMember makes a node a member of the metadata group (a voter while it
// has fewer than metaVoterTarget), with its incarnation (Join on the
// leader). A removed node is refused. A node id the membership knows by another incarnation
// is refused before anything changes: that node's data dir was wiped, and
// it must not vote under the old id. Joining again as the same voter at
// the same address changes nothing but a missing incarnation.
func (g *metaGroup) addMember(ctx context.Context, req *clusterv1.JoinRequest) error {
	id, addr := req.GetNodeId(), req.GetAddress()
	var clusterID string
	var known *clusterv1.Node
	g.fsm.View(func(s *clusterv1.MetaSnapshot) {
		clusterID = s.ClusterId
		for _, m := range s.Nodes {
			if m.NodeId == id {
				known = proto.Clone(m).(*clusterv1.Node)
			}
		}
	})
	if c := req.GetClusterId(); c != "" && clusterID != "" && c != clusterID {
		msg := fmt.Sprintf("node %s belongs to cluster %s, not to this cluster %s: it cannot join; start it with an empty data dir to join under a new id", id, c, clusterID)
		g.n.log.Error("refused a join: "+msg, "peer", id)
		return apierror.Invalid("%s", msg)
	}
	if known.GetMembership() == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED {
		g.n.log.Error("refused a join: "+meta.RemovedMessage(id), "peer", id)
		return apierror.Invalid("%s", meta.RemovedMessage(id))
	}
	if inc := known.GetIncarnation(); inc != "" && req.GetIncarnation() != "" && inc != req.GetIncarnation() {
		g.n.log.Error("refused a join: "+identity.StaleMessage(id, inc, req.GetIncarnation()), "peer", id)
		return apierror.Invalid("%s", identity.StaleMessage(id, inc, req.GetIncarnation()))
	}
	f := g.raft.GetConfiguration()
	if err := g.n.await(ctx, f); err != nil {
		return apierror.Busy("metadata configuration: %v", err)
	}
	in, voters, others := false, 0, 0
	for _, s := range f.Configuration().Servers {
		if s.ID != raft.ServerID(id) && s.Address == raft.ServerAddress(addr) {
			// Raft takes an address once. The node that had it may have
			// been removed (a machine replaced under a new id): it leaves
			// the group at once (reconcileVoters would, in a moment).
			if !g.n.removedMember(string(s.ID)) {
				return apierror.Invalid("address %s is node %s's, a member of the cluster: if %s is gone for good, remove it first (raftbus node remove %s), then start %s again", addr, s.ID, s.ID, s.ID, id)
			}
			if err := g.n.await(ctx, g.raft.RemoveServer(s.ID, 0, membershipChangeTimeout)); err != nil {
				return apierror.Busy("remove %s from the metadata group: %v", s.ID, err)
			}
			return apierror.Busy("removed node %s left the address %s to %s: join again", s.ID, addr, id)
		}
		in = in || s.ID == raft.ServerID(id) && s.Address == raft.ServerAddress(addr)
		if s.ID != raft.ServerID(id) {
			others++
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
	}
	if in && req.GetRebuildMetadata() {
		return g.demoteForRebuild(ctx, id, f.Configuration())
	}
	if !in {
		// A voter while the group has fewer than it should, else a
		// non-voter (reconcileVoters promotes it when a voter goes).
		add := g.raft.AddNonvoter
		if voters < metaVoterTarget(others+1) {
			add = g.raft.AddVoter
		}
		if err := g.n.await(ctx, add(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipChangeTimeout)); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return g.notLeader()
			}
			return apierror.Busy("add %s to the metadata group: %v", id, err)
		}
	}
	if known.GetAddress() != addr || known.GetIncarnation() == "" && req.GetIncarnation() != "" {
		cmd := &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_AddNode{AddNode: &clusterv1.AddNode{
			Node: &clusterv1.Node{NodeId: id, Address: addr, Incarnation: req.GetIncarnation()},
		}}}
		if _, err := g.propose(ctx, cmd); err != nil {
			return err
		}
	}
	return g.ensureMembers(ctx)
}

// demoteForRebuild makes member id, whose metadata log is damaged, a
// non-voter before it starts again on an empty log (see rebuildMeta). The
// change commits on a majority of the remaining voters, which by Raft's
// log matching then hold every entry id ever acknowledged: forgetting
// them costs no majority anything. reconcileVoters makes it a voter again
// once it is heard from; a voter with an empty log is safe (it grants no
// vote to a candidate missing what it acknowledged since, and it keeps
// its term and vote), it only cannot lead until it has caught up.
func (g *metaGroup) demoteForRebuild(ctx context.Context, id string, conf raft.Configuration) error {
	for _, s := range conf.Servers {
		if s.ID != raft.ServerID(id) || s.Suffrage != raft.Voter {
			continue
		}
		g.n.log.Warn("metadata group: a member rebuilds its damaged metadata log; it is a non-voter until it is heard from again", "node", id)
		if err := g.n.await(ctx, g.raft.DemoteVoter(s.ID, 0, membershipChangeTimeout)); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return g.notLeader()
			}
			return apierror.Busy("make %s a non-voter: %v", id, err)
		}
	}
	return nil
}

// runMetaLeaderDuties keeps membership complete, the metadata group's
// voters at their number and the replicas where the membership wants them
// while this node leads the metadata group.
func (n *Node) runMetaLeaderDuties() {
	n.whileMetaLeader(500*time.Millisecond, 5*time.Second, func(ctx context.Context) {
		if err := n.meta.ensureMembers(ctx); err != nil {
			n.log.Debug("record metadata members", "err", err)
		}
		if err := n.meta.reconcileVoters(ctx); err != nil {
			n.log.Debug("metadata voters", "err", err)
		}
		// Placement changes only once this leader has applied every
		// change committed before it (a plan from a stale view would be
		// refused, but would waste a round).
		if err := n.meta.confirmLeadership(ctx); err == nil {
			if err := n.placeReplicas(ctx); err != nil {
				n.log.Debug("place replicas", "err", err)
			}
		}
	})
}

// logMetaLeadership logs each time this node takes or loses the
// metadata group's leadership, with the term: which node led the cluster's
// metadata when is what an operator reads first after a failure. It is
// the only reader of the group's LeaderCh. The caller has added the
// goroutine to n.wg.
func (n *Node) logMetaLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case leading := <-n.meta.raft.LeaderCh():
			if leading {
				n.log.Info("this node leads the metadata group", "term", n.meta.raft.CurrentTerm())
			} else {
				n.log.Info("this node no longer leads the metadata group", "term", n.meta.raft.CurrentTerm())
			}
		}
	}
}

// whileMetaLeader runs duty every interval, each run bounded by timeout,
// while this node leads the metadata group, until the node stops. The
// caller has added the goroutine to n.wg.
func (n *Node) whileMetaLeader(interval, timeout time.Duration, duty func(ctx context.Context)) {
	defer n.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		if !n.meta.isLeader() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		duty(ctx)
		cancel()
	}
}
