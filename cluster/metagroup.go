package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// metaGroupName is the Raft group id of the metadata group.
const metaGroupName = "meta"

// joinTimeout bounds how long a new node keeps asking to be let in.
const joinTimeout = 30 * time.Second

// metaGroup is this node's member of the metadata Raft group.
type metaGroup struct {
	n     *Node
	fsm   *meta.FSM
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	snaps *partition.Snapshots
}

func openMetaGroup(n *Node) (*metaGroup, error) {
	dir := filepath.Join(n.cfg.DataDir, "meta")
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
	logger := partition.RaftLogger(n.log, metaGroupName)
	logs := checkedLog{store}
	snaps, err := partition.OpenSnapshots(dir, metaGroupName, n.log, func(err error) {
		n.log.Error("the metadata group's snapshot is damaged", "err", err)
	})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: open metadata snapshots: %w", err)
	}
	err = logs.verify()
	if err == nil {
		err = partition.CheckStored(metaGroupName, snaps, logs, store)
	}
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: the metadata log in %s is damaged (%w); this node cannot start on it: restore the data dir from a backup", dir, err)
	}
	transport, err := n.mux.Transport(metaGroupName)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: metadata transport: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.NodeID)
	rc.HeartbeatTimeout = n.raftTimes(partition.DefaultHeartbeatTimeout)
	rc.ElectionTimeout = n.raftTimes(partition.DefaultElectionTimeout)
	rc.LeaderLeaseTimeout = n.raftTimes(partition.DefaultLeaderLeaseTimeout)
	rc.Logger = logger
	g := &metaGroup{n: n, fsm: meta.NewFSM(), store: store, snaps: snaps}
	g.raft, err = raft.NewRaft(rc, g.fsm, logs, store, snaps, transport)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: start metadata group: %w", err)
	}
	return g, nil
}

func (g *metaGroup) close() {
	if err := g.raft.Shutdown().Error(); err != nil {
		g.n.log.Warn("metadata group shutdown", "err", err)
	}
	g.store.Close()
}

// joinOrBootstrap makes a node with no metadata state a member: it forms a
// cluster from the configured peers (or alone), or asks a running node to
// let it join. A node with state just resumes.
func (g *metaGroup) joinOrBootstrap() error {
	cfg := g.n.cfg
	has, err := raft.HasExistingState(g.store, g.store, g.snaps)
	if err != nil {
		return fmt.Errorf("cluster: read metadata state: %w", err)
	}
	if has {
		return nil
	}
	if cfg.Join != "" {
		return g.join(cfg.Join)
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
	err = g.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	return nil
}

func (g *metaGroup) join(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	req := &clusterv1.JoinRequest{NodeId: g.n.cfg.NodeID, Address: g.n.addr}
	var lastErr error
	for attempt := 0; ; attempt++ {
		conn, err := g.n.peers.get(addr)
		if err == nil {
			_, err = clusterv1.NewNodeServiceClient(conn).Join(ctx, req)
			if err == nil {
				g.n.log.Info("joined the cluster", "via", addr)
				return nil
			}
		}
		lastErr = err
		if e := asAPIError(err); !e.retryable && e.reason != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			return fmt.Errorf("cluster: join via %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: join via %s: gave up after %v: %w", addr, joinTimeout, lastErr)
		case <-time.After(backoff(attempt)):
		}
	}
}

func backoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 6), 2*time.Second)
}

func (g *metaGroup) isLeader() bool { return g.raft.State() == raft.Leader }

func (g *metaGroup) leaderAddr() string {
	addr, _ := g.raft.LeaderWithID()
	return string(addr)
}

// propose commits one metadata command; only on the leader.
func (g *metaGroup) propose(ctx context.Context, cmd *clusterv1.MetaCommand) (*clusterv1.MetaResult, error) {
	cmd.NowUnixMs = time.Now().UnixMilli()
	b, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode metadata command: %w", err)
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	f := g.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return nil, g.notLeader()
		}
		return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "metadata change: %v; it may or may not have taken effect", err)
	}
	res := f.Response().(*clusterv1.MetaResult)
	if res.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		return nil, errorf(res.GetErrorReason(), "%s", res.GetErrorMessage())
	}
	return res, nil
}

func (g *metaGroup) notLeader() *apiError {
	addr, id := g.raft.LeaderWithID()
	if id == "" {
		return busy("the metadata group has no leader yet")
	}
	e := errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "this node does not lead the metadata group; %s at %s does", id, addr)
	e.leader = &raftbusv1.LeaderHint{NodeId: string(id), Address: string(addr)}
	return e
}

// ensureMembers records every voter of the metadata group as a member, and
// names the cluster, once this node leads. Bootstrapped voters are known to
// Raft before they are members; entities are placed only on members.
func (g *metaGroup) ensureMembers(ctx context.Context) error {
	var clusterID string
	known := make(map[string]string)
	g.fsm.View(func(s *clusterv1.MetaSnapshot) {
		clusterID = s.ClusterId
		for _, m := range s.Nodes {
			known[m.NodeId] = m.Address
		}
	})
	if clusterID == "" {
		var b [8]byte
		rand.Read(b[:])
		cmd := &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_SetClusterId{SetClusterId: &clusterv1.SetClusterID{ClusterId: hex.EncodeToString(b[:])}}}
		if _, err := g.propose(ctx, cmd); err != nil {
			return err
		}
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
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

// addMember makes a node a voter and a member (Join on the leader).
func (g *metaGroup) addMember(ctx context.Context, id, addr string) error {
	if err := g.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second).Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return g.notLeader()
		}
		return busy("add %s to the metadata group: %v", id, err)
	}
	return g.ensureMembers(ctx)
}

// runMetaLeaderDuties keeps membership complete while this node leads the
// metadata group.
func (n *Node) runMetaLeaderDuties() {
	defer n.wg.Done()
	tick := time.NewTicker(500 * time.Millisecond)
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.meta.ensureMembers(ctx); err != nil {
			n.log.Debug("record metadata members", "err", err)
		}
		cancel()
	}
}

// internal is ctx without the caller's routing request, for the calls a
// node makes on its own behalf while serving one (looking up an entity,
// waiting for new partitions): those route freely even when the caller's
// own call must not be forwarded.
func internal(ctx context.Context) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.MD{})
}

// forwarded reports whether the caller asked not to be forwarded (or is a
// node forwarding already).
func forwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return slices.Contains(md.Get(ForwardKey), NeverForward)
}
