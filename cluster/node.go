package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fullstorydev/grpchan/inprocgrpc"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/raftbus/raftbus/cluster/access"
	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/cluster/idle"
	"github.com/raftbus/raftbus/cluster/metrics"
	"github.com/raftbus/raftbus/cluster/raftgrpc"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/cluster/service"
	"github.com/raftbus/raftbus/internal/certs"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
)

// MaxMessageBytes bounds one gRPC message in either direction, the Raft
// transport's included: partitions and the metadata group keep their
// AppendEntries requests well under it (partition.MaxAppendEntriesBytes,
// maxMetaAppendEntriesBytes).
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
	// MaxClockOffset is how far this node's clock may be from a majority
	// of the cluster's clocks before it refuses to lead
	// (DefaultMaxClockOffset when zero). Every node should have the same.
	MaxClockOffset time.Duration
	// Clock is every wall-clock reading the node makes; nil is the
	// machine's clock. Tests and fault injection give a clock.System with
	// an offset to skew the node.
	Clock clock.Source
	// TLS, when set, secures the gRPC port and the calls to peers with the
	// node's certificate (see internal/certs), and every call is checked
	// against its caller's certificate (see cluster/access). Nil: plain
	// TCP, every caller let through.
	TLS *certs.NodeTLS
	// idleClock measures how long entities go unused, and idleCheckEvery
	// spaces the metadata leader's checks of auto_delete_on_idle (see
	// idlecheck.go): Clock and defaultIdleCheckEvery unless an in-process
	// test sets them to see an entity through minutes of idleness.
	idleClock      clock.Source
	idleCheckEvery time.Duration
	// forgetStreamsAfter is how long a deleted source's stream must have
	// been quiet before a target forgets its mark (see marksweep.go):
	// defaultForgetStreamsAfter unless an in-process test sets it.
	forgetStreamsAfter time.Duration
	// nodeLogFS is the file system under the node log: the operating
	// system's unless an in-process test makes the disk fail.
	nodeLogFS raftlog.FS
	// QuiesceAfter is how long a partition must serve no request before
	// its replicas close its Raft group until it is needed again (see
	// quiesce.go): DefaultQuiesceAfter when zero, never when negative.
	QuiesceAfter time.Duration
	// Auth makes every public call need a SharedAccessSignature token
	// signed with a key of an access policy (see cluster/access); it
	// needs TLS, which authenticates the nodes to each other.
	Auth bool
}

// Node is one running member of a cluster.
type Node struct {
	cfg    Config
	log    *slog.Logger
	addr   string
	lis    net.Listener
	server *grpc.Server
	guard  *access.Guard // checks the tokens of calls (with Auth)
	// inProcess reaches the public services from this process.
	inProcess *inprocgrpc.Channel
	mux       *raftgrpc.Mux
	meta      *metaGroup
	nodeLog   *raftlog.Log // the Raft logs of every partition replica here
	peers     *routing.Peers
	leaders   *routing.Leaders // of partitions this node does not hold

	mu       sync.RWMutex
	replicas map[string]*replica // by Raft group name
	// dormant are the replicas closed while their partition is quiet
	// (see quiesce.go), by group name; never in replicas at once.
	dormant map[string]*dormant
	// placedVersion counts the changes to replicas, dormant and rebuilds
	// (under mu for writing: every write to one of them bumps it). With
	// desiredVersion it tells a look over every partition placed here
	// whether what it found still holds (see settled and Ready).
	placedVersion uint64

	// desired is what the metadata places on this node as of the last
	// look, stale once desiredStale is closed (see desiredNow);
	// desiredVersion counts its recomputations.
	desiredMu      sync.Mutex
	desired        map[string]wantedReplica
	desiredStale   <-chan struct{}
	desiredVersion uint64

	// settled is the state in which the reconciler last looked over
	// every partition placed here and found nothing to open, remove or
	// wake, nextDue the earliest time (Unix ms) a dormant replica has
	// work due and lastLook when it last looked: until the state changes
	// or the work comes due, its rounds look at the open replicas only.
	// The reconciler's.
	settled  placedKey
	nextDue  int64
	lastLook time.Time
	// readyAt is the state in which Ready last found every partition
	// placed here serving (under readyMu).
	readyMu sync.Mutex
	readyAt placedKey
	// planned is the metadata change channel and the nodes heard from
	// when meta.Plan last had nothing to do (placeReplicas's).
	planned struct {
		changes <-chan struct{}
		up      string
	}

	// ident is this node's data dir identity; members what the committed
	// membership records (see incarnation.go).
	ident   nodeIdentity
	members atomic.Pointer[map[string]*clusterv1.Node]
	// clocks measures and judges this node's clock (see clocksync.go).
	clocks *clockSync
	// metaTransferring is set while this node hands the metadata group
	// over.
	metaTransferring atomic.Bool
	// failed receives the reason this node must stop (its data dir is not
	// the one its cluster knows); failOnce guards it.
	failed   chan error
	failOnce sync.Once
	// rebuilds are the replicas being rebuilt (under mu), by group; kick
	// wakes the reconciler; lastForget is when it last looked for
	// replicas of deleted entities (the reconciler's).
	rebuilds   map[string]*rebuildState
	kick       chan struct{}
	lastForget time.Time
	// rounds counts the reconciler's rounds, looks those that looked over
	// every partition placed here, wakes the dormant replicas opened, for
	// tests.
	rounds atomic.Uint64
	looks  atomic.Uint64
	wakes  atomic.Uint64

	// idle notes when the public services last served a call on each
	// entity (see idlecheck.go).
	idle *idle.Tracker

	// serving is set once the metadata group is open; until then the
	// public services answer SERVER_BUSY (the Raft transport serves at
	// once: a joining node is replicated to before Start returns).
	serving atomic.Bool
	// draining is set once Shutdown begins: the node is no longer ready;
	// drained is closed then, which ends the receive streams between
	// their grants.
	draining atomic.Bool
	drained  chan struct{}
	// metrics are the node's Prometheus metrics; grpcHealth is the gRPC
	// health service, SERVING while the node is Ready.
	metrics    *metrics.Metrics
	grpcHealth *health.Server
	stop       chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup
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
	if cfg.MaxClockOffset == 0 {
		cfg.MaxClockOffset = DefaultMaxClockOffset
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewSystem(0)
	}
	if cfg.idleClock == nil {
		cfg.idleClock = cfg.Clock
	}
	if cfg.idleCheckEvery == 0 {
		cfg.idleCheckEvery = defaultIdleCheckEvery
	}
	if cfg.forgetStreamsAfter == 0 {
		cfg.forgetStreamsAfter = defaultForgetStreamsAfter
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Auth && cfg.TLS == nil {
		return nil, errors.New("cluster: access policies need TLS: without it, nodes cannot tell a peer from a client")
	}
	if cfg.TLS != nil && cfg.TLS.ID != cfg.NodeID {
		return nil, fmt.Errorf("cluster: the TLS certificate is node %s's, not node %s's", cfg.TLS.ID, cfg.NodeID)
	}
	rec, _, err := identity.Claim(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
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
	n := &Node{
		cfg:      cfg,
		log:      log.With("node", cfg.NodeID),
		addr:     addr,
		lis:      lis,
		peers:    newPeers(peerCredentials(cfg.TLS)),
		leaders:  routing.NewLeaders(),
		replicas: make(map[string]*replica),
		dormant:  make(map[string]*dormant),
		ident:    nodeIdentity{dir: cfg.DataDir, rec: rec},
		clocks:   newClockSync(cfg.Clock, cfg.MaxClockOffset),
		failed:   make(chan error, 1),
		rebuilds: make(map[string]*rebuildState),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		drained:  make(chan struct{}),
	}
	n.members.Store(&map[string]*clusterv1.Node{})
	n.idle = n.newIdleTracker()
	n.metrics = metrics.New(metricsSource{n})
	n.grpcHealth = newHealth()
	n.mux, err = raftgrpc.NewMux(raftgrpc.Config{
		LocalAddr:       raft.ServerAddress(addr),
		MaxMessageBytes: MaxMessageBytes,
		DialOptions:     append(raftbusv1.DialOptions(), grpc.WithTransportCredentials(peerCredentials(cfg.TLS))),
		Outgoing:        n.outgoingIdentity,
		Admit:           n.admit,
		Dormant:         n.isDormant,
		Wake:            n.wakeForPeer,
	})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var policies access.Policies
	if cfg.Auth {
		policies = nodePolicies{n}
	}
	n.guard = access.NewGuard(n.log, policies, cfg.Clock.Now)
	own, statusStream := n.unaryInterceptors(), service.StatusStreamInterceptor(n.log)
	ic := serverInterceptors(cfg.TLS, n.guard, own, []grpc.StreamServerInterceptor{statusStream})
	n.server = grpc.NewServer(serverOptions(cfg.TLS, ic)...)
	n.mux.Register(n.server)
	// gRPC's standard health service (SERVING once Ready, see runHealth)
	// and server reflection, so that grpcurl and probes need no .proto.
	healthpb.RegisterHealthServer(n.server, n.grpcHealth)
	reflection.Register(n.server)
	// The public services see the node through service.Node; the node
	// service serves two calls of theirs that other nodes make.
	admin := service.NewAdmin(serviceNode{n}, service.Config{DefaultPartitions: cfg.DefaultPartitions})
	msg := service.NewMessaging(serviceNode{n})
	msg.ServeGrantsThrough(chainUnary(ic.unary))
	msg.EndStreamsWhen(n.drained)
	policySvc := service.NewAccess(serviceNode{n})
	registerPublic(n.server, admin, msg, policySvc)
	// In process, the node's own front doors call past the connection
	// bound and the access guard (see InProcess), the grants of their
	// receive streams too.
	local := service.NewMessaging(serviceNode{n})
	ownChain := chainUnary(own)
	local.ServeGrantsThrough(ownChain)
	local.EndStreamsWhen(n.drained)
	n.inProcess = newInProcess(ownChain, statusStream)
	registerPublic(n.inProcess, admin, local, policySvc)
	clusterv1.RegisterNodeServiceServer(n.server, &nodeService{n: n, admin: admin, msg: msg})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.server.Serve(lis)
	}()

	// abort stops a node that failed to start. When the node stopped
	// itself (a peer knows its id by another incarnation), that is the
	// reason to report, not what it broke on the way.
	abort := func(err error) (*Node, error) {
		n.Close()
		select {
		case ferr := <-n.failed:
			return nil, ferr
		default:
			return nil, err
		}
	}
	// A node whose data dir was wiped, or belongs to another cluster, must
	// not bootstrap, vote or join: ask the nodes it was told of first.
	formed, err := n.vetAgainstPeers()
	if err != nil {
		return abort(err)
	}
	if err := openStorage(n); err != nil {
		return abort(err)
	}
	if err := finishMetaRebuild(cfg.DataDir); err != nil {
		return abort(fmt.Errorf("cluster: %w", err))
	}
	n.meta, err = openMetaGroup(n)
	if damage := (*metaDamagedError)(nil); errors.As(err, &damage) {
		n.meta, err = n.rebuildMeta(formed, damage)
	}
	if err != nil {
		return abort(err)
	}
	if err := n.meta.joinOrBootstrap(formed); err != nil {
		return abort(err)
	}
	if err := n.refuseIfAlone(); err != nil {
		return abort(err)
	}
	n.syncIdentity()
	// Judge the clock before serving, so that a node that comes up skewed
	// never stamps a command.
	n.checkClock()
	n.wg.Add(8)
	go n.runMetaLeaderDuties()
	go n.logMetaLeadership()
	go n.runIdleCheck()
	go n.runReconciler()
	go n.runIdentity()
	go n.runClockSync()
	go n.runHealth()
	go n.runRootKeyFile()
	// From here on a node that must stop closes itself (see fail); until
	// here it is Start that gives up.
	n.serving.Store(true)
	select {
	case err := <-n.failed:
		n.Close()
		return nil, err
	default:
	}
	n.log.Info("node started", "address", addr, "data_dir", cfg.DataDir)
	return n, nil
}

// startingInterceptor turns requests away while the node starts.
func (n *Node) startingInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !n.serving.Load() && !strings.HasPrefix(info.FullMethod, "/raftbus.raft.") && info.FullMethod != clusterv1.NodeService_Ping_FullMethodName {
		return nil, apierror.Busy("node %s is starting", n.cfg.NodeID)
	}
	return handler(ctx, req)
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Failed delivers the reason the node stopped on its own: its data dir is
// not the one its cluster knows (it was wiped or replaced). The node has
// closed itself, or is closing; the process should exit.
func (n *Node) Failed() <-chan error { return n.failed }

// fail stops the node for good on its own: it must take no further part
// in any Raft group.
func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		n.log.Error("node stops: "+err.Error(), "err", err)
		n.failed <- err
		// A node still starting is stopped by Start. Close waits for the
		// node's goroutines, one of which may be the caller.
		if n.serving.Load() {
			go n.Close()
		}
	})
}

// Addr is the node's advertised gRPC address.
func (n *Node) Addr() string { return n.addr }

// Guard checks SharedAccessSignature tokens against the cluster's access
// policies (with Config.Auth; it accepts every token without), for front
// doors that take tokens other than in gRPC metadata.
func (n *Node) Guard() *access.Guard { return n.guard }

// Close stops the node: the server, every partition replica and the
// metadata group. Data stays on disk for the next Start.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.grpcHealth.Shutdown()
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
		n.placedVersion++
		n.mu.Unlock()
		if n.meta != nil {
			n.meta.close()
		}
		if n.mux != nil {
			n.mux.Close()
		}
		n.peers.Close()
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
