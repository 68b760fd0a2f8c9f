package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/raftbus/raftbus/cluster/metrics"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/cluster/service"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// readinessInterval is how often the gRPC health service is brought in
// line with Ready: readiness depends on Raft groups that tell nobody when
// they catch up.
const readinessInterval = 200 * time.Millisecond

// Metrics is what the node's /metrics serves.
func (n *Node) Metrics() prometheus.Gatherer { return n.metrics.Gatherer() }

// Ready is nil when the node serves what it should: its metadata group is
// open, has a leader and has applied what it knows committed, records the
// cluster's id and this node as a member, and every
// partition the metadata places here is open with its entity. Otherwise it
// says what is missing. A node starting or shutting down is not ready.
func (n *Node) Ready() error {
	select {
	case <-n.stop:
		return errors.New("the node is stopped")
	default:
	}
	if n.draining.Load() {
		return errors.New("the node is shutting down")
	}
	if !n.serving.Load() {
		return errors.New("the node is starting")
	}
	if _, id := n.meta.raft.LeaderWithID(); id == "" {
		return errors.New("the metadata group has no leader")
	}
	if applied, commit := n.meta.raft.AppliedIndex(), n.meta.raft.CommitIndex(); applied < commit {
		return fmt.Errorf("the metadata group has applied %d of %d committed entries", applied, commit)
	}
	var clusterID string
	member := false
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		clusterID = s.ClusterId
		for _, m := range s.Nodes {
			member = member || m.NodeId == n.cfg.NodeID
		}
	})
	if clusterID == "" || !member {
		return errors.New("the metadata does not record the cluster and this node as its member yet")
	}
	// Once every placed partition serves, it goes on serving until the
	// metadata or the set of replicas changes (a replica that has its
	// entity keeps it): the look over thousands is not taken again.
	desired, version := n.desiredVersioned()
	n.mu.RLock()
	defer n.mu.RUnlock()
	key := placedKey{desired: version, placed: n.placedVersion}
	n.readyMu.Lock()
	defer n.readyMu.Unlock()
	if n.readyAt == key {
		return nil
	}
	if err := n.partitionsServe(desired); err != nil {
		return err
	}
	n.readyAt = key
	return nil
}

// partitionsServe is nil when every partition desired places here is
// open with its entity, or quiet. The caller holds mu.
func (n *Node) partitionsServe(desired map[string]wantedReplica) error {
	for g, w := range desired {
		if !slices.ContainsFunc(w.placed, func(s raft.Server) bool { return string(s.ID) == n.cfg.NodeID }) {
			continue // moving here or off: not this node's to serve yet
		}
		if _, ok := n.rebuilds[g]; ok {
			return fmt.Errorf("partition %s is being rebuilt", g)
		}
		if n.dormant[g] != nil {
			continue // quiet: it had its entity when it closed
		}
		r, ok := n.replicas[g]
		if !ok {
			return fmt.Errorf("partition %s is not open yet", g)
		}
		if !r.ready() {
			return fmt.Errorf("partition %s does not have its entity yet", g)
		}
	}
	return nil
}

// runHealth keeps the gRPC health service in line with Ready until the
// node stops. Shutdown turns it NOT_SERVING for good first.
func (n *Node) runHealth() {
	defer n.wg.Done()
	tick := time.NewTicker(readinessInterval)
	defer tick.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if n.Ready() != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		n.setHealth(st)
		select {
		case <-tick.C:
		case <-n.stop:
			return
		}
	}
}

// healthServices are the names the gRPC health service answers for: the
// node as a whole ("") and each public service.
var healthServices = []string{"", "raftbus.v1.AdminService", "raftbus.v1.MessagingService"}

func (n *Node) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	for _, s := range healthServices {
		n.grpcHealth.SetServingStatus(s, st)
	}
}

// newHealth returns the gRPC health service of a node that is not serving
// yet.
func newHealth() *health.Server {
	h := health.NewServer()
	for _, s := range healthServices {
		h.SetServingStatus(s, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return h
}

// isStandardService reports whether a method is one of gRPC's own
// services (health, reflection): they speak plain gRPC codes and answer
// while the node starts.
func isStandardService(method string) bool {
	return strings.HasPrefix(method, "/grpc.")
}

// unaryInterceptors are the node's server interceptors, outermost first:
// metrics see the status a client gets, which the status interceptor
// makes. gRPC's own services pass the status and starting interceptors
// untouched: health must answer NOT_SERVING, not SERVER_BUSY, while the
// node starts.
func (n *Node) unaryInterceptors() []grpc.UnaryServerInterceptor {
	return []grpc.UnaryServerInterceptor{
		n.metrics.UnaryInterceptor(routing.FromNode),
		skipStandard(service.StatusInterceptor(n.log)),
		skipStandard(n.startingInterceptor),
		skipStandard(n.idleInterceptor),
	}
}

// skipStandard applies next to every call but those of gRPC's own
// services.
func skipStandard(next grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if isStandardService(info.FullMethod) {
			return handler(ctx, req)
		}
		return next(ctx, req, info, handler)
	}
}

// countingFSM counts the snapshots of a state machine, for metrics.
type countingFSM struct {
	raft.FSM
	snapshots *atomic.Uint64
}

func (c countingFSM) Snapshot() (raft.FSMSnapshot, error) {
	c.snapshots.Add(1)
	return c.FSM.Snapshot()
}

// metricsSource is the node as its metrics read it.
type metricsSource struct{ n *Node }

var _ metrics.Source = metricsSource{}

func (s metricsSource) Ready() error { return s.n.Ready() }

func (s metricsSource) EachGroup(fn func(group string, st partition.RaftStats)) {
	n := s.n
	// The metadata group is opened by Start before serving is set.
	if m := n.meta; n.serving.Load() && m != nil {
		fn("meta", partition.RaftStats{
			Leader:       m.isLeader(),
			Term:         m.raft.CurrentTerm(),
			CommitIndex:  m.raft.CommitIndex(),
			AppliedIndex: m.raft.AppliedIndex(),
			LastContact:  m.raft.LastContact(),
			Snapshots:    m.snapshots.Load(),
		})
	}
	for _, r := range s.replicas() {
		fn(r.entity+"/"+strconv.FormatUint(uint64(r.id), 10), r.p.RaftStats())
	}
}

func (s metricsSource) EachLed(fn func(id uint32, e partition.EntityStats)) {
	for _, r := range s.replicas() {
		if r.p.IsLeader() {
			r.p.EachEntity(func(e partition.EntityStats) { fn(r.id, e) })
		}
	}
}

// replicas is a copy of the node's replicas, so that reading them does
// not hold the node's lock.
func (s metricsSource) replicas() []*replica {
	s.n.mu.RLock()
	defer s.n.mu.RUnlock()
	out := make([]*replica, 0, len(s.n.replicas))
	for _, r := range s.n.replicas {
		out = append(out, r)
	}
	return out
}

// messageStats adds up the message counters of the partitions this node
// leads: the figures of its metrics, for raftbus status.
func (n *Node) messageStats() *raftbusv1.NodeMessageStats {
	out := &raftbusv1.NodeMessageStats{}
	src := metricsSource{n}
	for _, r := range src.replicas() {
		if !r.p.IsLeader() {
			continue
		}
		out.PartitionsLed++
		r.p.EachEntity(func(e partition.EntityStats) {
			c := e.Counters
			out.Sent += c.Sent
			out.Received += c.Received
			out.Completed += c.Completed
			out.Abandoned += c.Abandoned
			out.Deferred += c.Deferred
			out.DeadLettered += c.DeadLettered
			out.Expired += c.Expired
			out.Duplicates += c.Duplicates
		})
	}
	return out
}
