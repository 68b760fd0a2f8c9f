package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	// DefaultTimeout bounds every RPC; InstallSnapshot gets a multiple of it
	// scaled by the snapshot's size.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxInFlight bounds the AppendEntries requests one pipeline has
	// sent without an answer, like raft's rpcMaxPipeline.
	DefaultMaxInFlight = 128
	// DefaultMaxInFlightBytes bounds their encoded bytes, so that what a
	// leader holds for a follower stays bounded whatever the entries' size.
	DefaultMaxInFlightBytes = 64 << 20
	// snapshotChunkSize is the size of the data messages of InstallSnapshot.
	snapshotChunkSize = 256 * 1024
	// snapshotTimeoutScale is the number of snapshot bytes that earn one more
	// Timeout, as raft's NetworkTransport does with DefaultTimeoutScale.
	snapshotTimeoutScale = 256 * 1024
)

// ErrClosed is returned by the methods of a closed Mux or GroupTransport.
var ErrClosed = errors.New("raftgrpc: transport closed")

// Config configures a Mux. The zero value of every field but LocalAddr is a
// safe default.
type Config struct {
	// LocalAddr is the gRPC address this node advertises to its peers. It is
	// the raft.ServerAddress of the node in every group.
	LocalAddr raft.ServerAddress
	// Timeout bounds each RPC (DefaultTimeout when zero).
	Timeout time.Duration
	// MaxInFlight bounds the unanswered requests of one AppendEntries
	// pipeline (DefaultMaxInFlight when zero; at least 2).
	MaxInFlight int
	// MaxInFlightBytes bounds the encoded bytes of those requests
	// (DefaultMaxInFlightBytes when zero). A request larger than the bound
	// is sent alone.
	MaxInFlightBytes int
	// MaxMessageBytes, when set, is the largest message the transport sends
	// or accepts as a client; the server it is registered on must accept
	// messages this large. Zero leaves gRPC's defaults.
	MaxMessageBytes int
	// DialOptions replace the default options of the connections to peers
	// (insecure transport credentials, reconnect backoff capped at 1 s).
	DialOptions []grpc.DialOption
	// Outgoing, when set, gives the gRPC metadata sent with every RPC to
	// the server target: who calls, for the receiving node to check.
	Outgoing func(target raft.ServerID) metadata.MD
	// Admit, when set, vets every incoming RPC before raft sees it (ctx
	// carries the caller's metadata). An error refuses the RPC and is what
	// the caller gets: a gRPC status as it is, anything else as
	// PERMISSION_DENIED.
	Admit func(ctx context.Context) error
	// Dormant, when set, reports whether a group with no open transport
	// here is one the node closed while it was idle and opens again on
	// demand; Wake then opens it. An incoming RPC for a dormant group
	// wakes it and waits for it as a vote request waits for a new group
	// (see groupOpenWait), except a heartbeat: it tells the group nothing
	// it needs, and a leader about to close too sends them.
	Dormant func(group string) bool
	Wake    func(group string)
}

// defaultDialOptions are the options of the connections to peers unless
// Config.DialOptions replaces them: raftbusv1.DialOptions (a restarted peer
// must not stay out of its Raft groups for gRPC's two-minute reconnect
// backoff; Raft has its own), without TLS.
func defaultDialOptions() []grpc.DialOption {
	return append(raftbusv1.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Mux carries the Raft traffic of all the groups of one node: one client
// connection per peer for the outgoing RPCs, and the
// RaftTransportService server that routes incoming RPCs to their group.
type Mux struct {
	localAddr        raft.ServerAddress
	timeout          time.Duration
	maxInFlight      int
	maxInFlightBytes int
	dialOptions      []grpc.DialOption
	outgoing         func(raft.ServerID) metadata.MD
	admit            func(context.Context) error
	dormant          func(string) bool
	wake             func(string)
	// refuseLeadership is set by RefuseLeadership.
	refuseLeadership atomic.Bool

	// ctx is cancelled by Close; every outgoing RPC runs under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.RWMutex
	closed     bool
	conns      map[raft.ServerAddress]*grpc.ClientConn
	groups     map[string]*GroupTransport
	heartbeats map[heartbeatKey]*heartbeats
	// opened is closed (and replaced) whenever a group's transport opens,
	// for the RPCs that wait for their group (see awaitGroup).
	opened chan struct{}

	// dials counts the connections made, heartbeatStreams the heartbeat
	// streams opened, heartbeatMessages the heartbeat messages received,
	// for tests.
	dials             atomic.Int64
	heartbeatStreams  atomic.Int64
	heartbeatMessages atomic.Int64
	// waiting counts the incoming RPCs waiting for their group to open.
	waiting atomic.Int64
}

// NewMux returns the Mux of a node advertising cfg.LocalAddr.
func NewMux(cfg Config) (*Mux, error) {
	if cfg.LocalAddr == "" {
		return nil, errors.New("raftgrpc: config: LocalAddr is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("raftgrpc: config: negative Timeout %s", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxInFlight < 2 {
		return nil, fmt.Errorf("raftgrpc: config: MaxInFlight %d, want at least 2", cfg.MaxInFlight)
	}
	if cfg.MaxInFlightBytes == 0 {
		cfg.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if cfg.MaxInFlightBytes < 0 || cfg.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("raftgrpc: config: negative MaxInFlightBytes %d or MaxMessageBytes %d", cfg.MaxInFlightBytes, cfg.MaxMessageBytes)
	}
	if cfg.DialOptions == nil {
		cfg.DialOptions = defaultDialOptions()
	}
	if cfg.MaxMessageBytes > 0 {
		cfg.DialOptions = append(cfg.DialOptions[:len(cfg.DialOptions):len(cfg.DialOptions)],
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(cfg.MaxMessageBytes), grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Mux{
		localAddr:        cfg.LocalAddr,
		timeout:          cfg.Timeout,
		maxInFlight:      cfg.MaxInFlight,
		maxInFlightBytes: cfg.MaxInFlightBytes,
		dialOptions:      cfg.DialOptions,
		outgoing:         cfg.Outgoing,
		admit:            cfg.Admit,
		dormant:          cfg.Dormant,
		wake:             cfg.Wake,
		ctx:              ctx,
		cancel:           cancel,
		conns:            make(map[raft.ServerAddress]*grpc.ClientConn),
		groups:           make(map[string]*GroupTransport),
		opened:           make(chan struct{}),
		heartbeats:       make(map[heartbeatKey]*heartbeats),
	}, nil
}

// RefuseLeadership makes the node refuse, from now on, the TimeoutNow
// requests that hand it the leadership of a group: a node shutting down
// hands its groups over and must not get them back.
func (m *Mux) RefuseLeadership() { m.refuseLeadership.Store(true) }

// LocalAddr is the address the node advertises in every group.
func (m *Mux) LocalAddr() raft.ServerAddress { return m.localAddr }

// Register adds the RaftTransportService to the node's gRPC server. That
// server must accept messages as large as the largest AppendEntries batch
// raft sends (up to raft.Config.MaxAppendEntries entries, whose bytes only
// the application can bound) and Config.MaxMessageBytes: gRPC's default
// limit of 4 MiB is set with grpc.MaxRecvMsgSize. Snapshots are chunked and
// need no more.
func (m *Mux) Register(s grpc.ServiceRegistrar) {
	raftv1.RegisterRaftTransportServiceServer(s, &transportServer{mux: m})
}

// Transport returns the raft.Transport of group. A group has at most one
// open transport per node; closing it frees the name again.
func (m *Mux) Transport(group string) (*GroupTransport, error) {
	if group == "" {
		return nil, errors.New("raftgrpc: transport: empty group name")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("raftgrpc: transport for group %s: %w", group, ErrClosed)
	}
	if _, ok := m.groups[group]; ok {
		return nil, fmt.Errorf("raftgrpc: transport for group %s: already open", group)
	}
	t := newGroupTransport(m, group)
	m.groups[group] = t
	close(m.opened)
	m.opened = make(chan struct{})
	return t, nil
}

// Close closes every group transport and every connection to peers. It does
// not stop the gRPC server the Mux is registered on; incoming RPCs fail with
// NOT_FOUND from then on.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	groups := make([]*GroupTransport, 0, len(m.groups))
	for _, t := range m.groups {
		groups = append(groups, t)
	}
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()

	for _, t := range groups {
		t.Close()
	}
	m.cancel()
	var errs []error
	for addr, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftgrpc: close connection to %s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// client returns the RaftTransportService client of the peer at addr,
// creating its connection on first use. grpc.NewClient does not connect
// yet; the connection is made (and remade after failures) by gRPC when RPCs
// need it.
func (m *Mux) client(addr raft.ServerAddress) (raftv1.RaftTransportServiceClient, error) {
	m.mu.RLock()
	cc, ok := m.conns[addr]
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if !ok {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if cc, ok = m.conns[addr]; !ok {
			var err error
			cc, err = grpc.NewClient(string(addr), m.dialOptions...)
			if err != nil {
				m.mu.Unlock()
				return nil, fmt.Errorf("connect to %s: %w", addr, err)
			}
			m.conns[addr] = cc
			m.dials.Add(1)
		}
		m.mu.Unlock()
	}
	return raftv1.NewRaftTransportServiceClient(cc), nil
}

// withIdentity adds the metadata of a call to target to ctx.
func (m *Mux) withIdentity(ctx context.Context, target raft.ServerID) context.Context {
	if m.outgoing == nil {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, m.outgoing(target))
}

// group returns the open transport of group, or nil.
func (m *Mux) group(name string) *GroupTransport {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.groups[name]
}

// groupOpenWait is how long an incoming vote request waits for its group
// to open here. The replicas of a new group open on each node as it learns of the
// entity, a few milliseconds apart: the first candidate's vote request
// must not fail on a node about to open its replica, or the election
// would wait out an election timeout.
const groupOpenWait = 500 * time.Millisecond

// awaitGroup returns the transport of group, waiting up to groupOpenWait
// (or ctx) for it to open; nil if it does not.
func (m *Mux) awaitGroup(ctx context.Context, name string) *GroupTransport {
	timer := time.NewTimer(groupOpenWait)
	defer timer.Stop()
	for {
		m.mu.RLock()
		t, opened, closed := m.groups[name], m.opened, m.closed
		m.mu.RUnlock()
		if t != nil || closed {
			return t
		}
		m.waiting.Add(1)
		gaveUp := false
		select {
		case <-opened:
		case <-timer.C:
			gaveUp = true
		case <-ctx.Done():
			gaveUp = true
		}
		m.waiting.Add(-1)
		if gaveUp {
			return nil
		}
	}
}

// isDormant reports whether group is dormant here (Config.Dormant).
func (m *Mux) isDormant(group string) bool {
	return m.dormant != nil && m.dormant(group)
}

// wakeGroup opens group when it is dormant here, reporting whether it was.
func (m *Mux) wakeGroup(group string) bool {
	if !m.isDormant(group) || m.wake == nil {
		return false
	}
	m.wake(group)
	return true
}

// unregister forgets t if it is still the transport of its group.
func (m *Mux) unregister(t *GroupTransport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups[t.group] == t {
		delete(m.groups, t.group)
	}
}
