package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/raftgrpc"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
)

// MaxMessageBytes bounds one gRPC message in either direction: a send of
// the largest message an entity may accept (100 MiB) plus its envelope.
const MaxMessageBytes = 110 << 20

// catchUpTimeout bounds how long a node waits to apply a metadata change
// the leader has acknowledged.
const catchUpTimeout = 5 * time.Second

// Config describes one node.
type Config struct {
	// NodeID names the node in the cluster for good; its data dir is bound
	// to it.
	NodeID string
	// ListenAddr is where the gRPC server listens ("127.0.0.1:7400";
	// port 0 picks a free one).
	ListenAddr string
	// AdvertiseAddr is how other nodes and clients reach this node.
	// Empty: the address the listener got.
	AdvertiseAddr string
	// DataDir holds the metadata group and every partition replica.
	DataDir string
	// Peers, for a new cluster formed by several nodes at once: every
	// initial node's id and address, this one included. All initial nodes
	// get the same list.
	Peers map[string]string
	// Join is the address of a running node of the cluster to join. With
	// neither Peers nor Join a new node forms a cluster of its own.
	Join string
	// DefaultPartitions is the partition count of entities created without
	// one (at least 1).
	DefaultPartitions uint32
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// RaftTimeScale multiplies the Raft timeouts of every group (1 when
	// zero). Tests on loaded machines may slow them down.
	RaftTimeScale float64
}

// Node is one running member of a cluster.
type Node struct {
	cfg     Config
	log     *slog.Logger
	addr    string
	lis     net.Listener
	server  *grpc.Server
	mux     *raftgrpc.Mux
	meta    *metaGroup
	nodeLog *raftlog.Log // the Raft logs of every partition replica here
	peers   *peerConns
	routing *leaderCache

	mu       sync.RWMutex
	replicas map[string]*replica // by Raft group name

	// rebuilds are the replicas being rebuilt (under mu), by group; kick
	// wakes the reconciler; lastForget is when it last looked for
	// replicas of deleted entities (the reconciler's).
	rebuilds   map[string]*rebuildState
	kick       chan struct{}
	lastForget time.Time

	rr roundRobin
	// serving is set once the metadata group is open; until then the
	// public services answer SERVER_BUSY (the Raft transport serves at
	// once: a joining node is replicated to before Start returns).
	serving   atomic.Bool
	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// identity is what a data dir records about the node that owns it.
type identity struct {
	NodeID string `json:"node_id"`
}

// Start starts a node: it opens the data dir, listens, joins or forms the
// cluster and serves until Close.
func Start(cfg Config) (*Node, error) {
	if cfg.NodeID == "" || cfg.DataDir == "" || cfg.ListenAddr == "" {
		return nil, errors.New("cluster: node id, data dir and listen address are required")
	}
	if cfg.DefaultPartitions == 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.RaftTimeScale == 0 {
		cfg.RaftTimeScale = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := claimDataDir(cfg.DataDir, cfg.NodeID); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("cluster: %s is already in use (another raftbusd?): choose another listen address: %w", cfg.ListenAddr, err)
		}
		return nil, fmt.Errorf("cluster: listen on %s: %w", cfg.ListenAddr, err)
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = lis.Addr().String()
	}
	mux, err := raftgrpc.NewMux(raftgrpc.Config{LocalAddr: raft.ServerAddress(addr)})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{
		cfg:      cfg,
		log:      log.With("node", cfg.NodeID),
		addr:     addr,
		lis:      lis,
		mux:      mux,
		peers:    newPeerConns(),
		routing:  newLeaderCache(),
		replicas: make(map[string]*replica),
		rebuilds: make(map[string]*rebuildState),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	n.server = grpc.NewServer(
		grpc.ChainUnaryInterceptor(statusInterceptor(n.log), n.startingInterceptor),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
	)
	mux.Register(n.server)
	raftbusv1.RegisterAdminServiceServer(n.server, &adminService{n: n})
	raftbusv1.RegisterMessagingServiceServer(n.server, &messagingService{n: n})
	clusterv1.RegisterNodeServiceServer(n.server, &nodeService{n: n})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.server.Serve(lis)
	}()

	if err := openStorage(n); err != nil {
		n.Close()
		return nil, err
	}
	n.meta, err = openMetaGroup(n)
	if err != nil {
		n.Close()
		return nil, err
	}
	if err := n.meta.joinOrBootstrap(); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.refuseIfAlone(); err != nil {
		n.Close()
		return nil, err
	}
	n.serving.Store(true)
	n.wg.Add(2)
	go n.runMetaLeaderDuties()
	go n.runReconciler()
	n.log.Info("node started", "address", addr, "data_dir", cfg.DataDir)
	return n, nil
}

// startingInterceptor turns requests away while the node starts.
func (n *Node) startingInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !n.serving.Load() && !strings.HasPrefix(info.FullMethod, "/raftbus.raft.") {
		return nil, busy("node %s is starting", n.cfg.NodeID)
	}
	return handler(ctx, req)
}

// claimDataDir creates the data dir or checks that it belongs to nodeID.
func claimDataDir(dir, nodeID string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("cluster: create data dir: %w", err)
	}
	path := filepath.Join(dir, "node.json")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		b, _ := json.Marshal(identity{NodeID: nodeID})
		if err := os.WriteFile(path, b, 0o640); err != nil {
			return fmt.Errorf("cluster: write %s: %w", path, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("cluster: read %s: %w", path, err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("cluster: %s is not a raftbus node identity: %w", path, err)
	}
	if id.NodeID != nodeID {
		return fmt.Errorf("cluster: data dir %s belongs to node %q, not %q: use that node id or another data dir", dir, id.NodeID, nodeID)
	}
	return nil
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Addr is the node's advertised gRPC address.
func (n *Node) Addr() string { return n.addr }

// Close stops the node: the server, every partition replica and the
// metadata group. Data stays on disk for the next Start.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		// Stop takes requests down with it: long polls end with the
		// replicas below, so there is nothing to drain gracefully.
		n.server.Stop()
		n.mu.Lock()
		for name, r := range n.replicas {
			if err := r.p.Close(); err != nil {
				n.log.Warn("close replica", "group", name, "err", err)
			}
		}
		n.replicas = map[string]*replica{}
		n.mu.Unlock()
		if n.meta != nil {
			n.meta.close()
		}
		n.mux.Close()
		n.peers.close()
		n.wg.Wait()
		// Last: a replica the reconciler was opening as the node stopped
		// writes to the log until it is closed again.
		if n.nodeLog != nil {
			if err := n.nodeLog.Close(); err != nil {
				n.log.Warn("close node log", "err", err)
			}
		}
	})
	return nil
}

// raftTimes scales the Raft timing of one group.
func (n *Node) raftTimes(d time.Duration) time.Duration {
	return time.Duration(float64(d) * n.cfg.RaftTimeScale)
}

// entity returns the committed definition of name, or NOT_FOUND.
func (n *Node) entity(ctx context.Context, name string) (*clusterv1.Entity, error) {
	var e *clusterv1.Entity
	err := n.catchUp(ctx, func() bool {
		e = n.meta.fsm.Entity(name)
		return e != nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) error {
		_, err := c.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: name})
		if err != nil && asAPIError(err).reason == raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
			_, err = c.GetTopic(ctx, &raftbusv1.GetTopicRequest{Name: name})
		}
		return err
	}, name)
	return e, err
}

// catchUp makes a lookup in the local metadata read-your-writes: when
// found reports false on a node that does not lead the metadata group, it
// asks the leader (which has applied every acknowledged change) with ask,
// and when the leader has it, waits to apply it too. So an entity created
// through one node can be used through any other at once.
func (n *Node) catchUp(ctx context.Context, found func() bool, ask func(context.Context, raftbusv1.AdminServiceClient) error, what string) error {
	if found() {
		return nil
	}
	if n.meta.isLeader() {
		// A leader elected a moment ago may not have applied everything
		// its predecessors committed: make sure before saying no.
		if err := n.meta.raft.Barrier(catchUpTimeout).Error(); err != nil {
			return busy("the metadata leader is catching up: %v", err)
		}
		if found() {
			return nil
		}
		return notFound("%q does not exist", what)
	}
	ctx = internal(ctx)
	_, err := atMetaLeader(ctx, n, func() (struct{}, error) {
		if found() {
			return struct{}{}, nil
		}
		return struct{}{}, notFound("%q does not exist", what)
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (struct{}, error) {
		return struct{}{}, ask(ctx, c)
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	for {
		changed := n.meta.fsm.Changes()
		if found() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return busy("%q exists but this node has not caught up with it yet", what)
		}
	}
}

// nodeAddrs maps node ids to addresses, as committed.
func (n *Node) nodeAddrs() map[string]string {
	out := make(map[string]string)
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		for _, m := range s.Nodes {
			out[m.NodeId] = m.Address
		}
	})
	return out
}
