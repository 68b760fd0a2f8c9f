package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/cluster/service"
	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// stallingStore is a Raft log store whose writes can be made to block, as
// a stalled disk blocks them. Raft's main loop blocks with them: a leader
// so stalled cannot notice that it has been deposed.
type stallingStore struct {
	*raft.InmemStore
	mu      sync.Mutex
	gate    chan struct{} // set: writes wait until it is closed
	entered chan struct{} // receives once a write waits at the gate
}

func (s *stallingStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *stallingStore) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *stallingStore) stall() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *stallingStore) release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

// metaMember is one member of a metadata group on an in-memory transport,
// wrapped in just enough of a Node to serve admin reads.
type metaMember struct {
	n     *Node
	store *stallingStore
	trans *raft.InmemTransport
}

func newMetaGroupOnMemory(t *testing.T, size int) []*metaMember {
	t.Helper()
	var members []*metaMember
	var servers []raft.Server
	for i := range size {
		id := fmt.Sprintf("n%d", i+1)
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(id))
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: addr})
		n := &Node{cfg: Config{NodeID: id, Clock: clock.NewSystem(0)}, log: slog.New(slog.DiscardHandler), peers: newPeers(peerCredentials(nil)), leaders: routing.NewLeaders(), replicas: map[string]*replica{}}
		members = append(members, &metaMember{n: n, store: &stallingStore{InmemStore: raft.NewInmemStore(), entered: make(chan struct{}, 1)}, trans: trans})
	}
	for _, a := range members {
		for _, b := range members {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
	for i, m := range members {
		rc := raft.DefaultConfig()
		rc.LocalID = servers[i].ID
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		rc.Logger = hclog.NewNullLogger()
		g := &metaGroup{n: m.n, fsm: meta.NewFSM()}
		r, err := raft.NewRaft(rc, g.fsm, m.store, raft.NewInmemStore(), raft.NewInmemSnapshotStore(), m.trans)
		if err != nil {
			t.Fatal(err)
		}
		g.raft = r
		m.n.meta = g
	}
	if err := members[0].n.meta.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.store.release()
			m.n.meta.raft.Shutdown().Error()
		}
	})
	return members
}

func metaLeader(t *testing.T, members []*metaMember, except *metaMember) *metaMember {
	t.Helper()
	var leader *metaMember
	await.Until(t, 10*time.Second, "a metadata leader", func() bool {
		for _, m := range members {
			if m != except && m.n.meta.isLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

func putQueueOn(t *testing.T, m *metaMember, q *raftbusv1.QueueProperties, create bool) {
	t.Helper()
	q, err := engine.NormalizeQueueProperties(q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.n.meta.propose(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutQueue{PutQueue: &clusterv1.PutQueue{Queue: q, Create: create}}}); err != nil {
		t.Fatalf("put queue %s: %v", q.GetName(), err)
	}
}

// TestDeposedMetadataLeaderDoesNotAnswerStaleReads stalls the metadata
// leader's disk and cuts it off; the others elect a new leader and change
// a queue. The old leader still believes it leads, and its state lacks the
// change: asked directly, it must refuse to answer rather than answer
// stale.
func TestDeposedMetadataLeaderDoesNotAnswerStaleReads(t *testing.T) {
	members := newMetaGroupOnMemory(t, 3)
	old := metaLeader(t, members, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := old.n.meta.propose(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_AddNode{AddNode: &clusterv1.AddNode{
		Node: &clusterv1.Node{NodeId: "n1", Address: "n1"},
	}}}); err != nil {
		t.Fatal(err)
	}
	putQueueOn(t, old, &raftbusv1.QueueProperties{Name: "orders", MaxDeliveryCount: proto.Int32(10)}, true)
	admin := service.NewAdmin(serviceNode{old.n}, service.Config{})
	asked := func(ctx context.Context) context.Context {
		return metadata.NewIncomingContext(ctx, metadata.Pairs(raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward))
	}
	if q, err := admin.GetQueue(asked(ctx), &raftbusv1.GetQueueRequest{Name: "orders"}); err != nil || q.GetQueue().GetMaxDeliveryCount() != 10 {
		t.Fatalf("read on the leader: %v, %v", q, err)
	}

	// Stall the leader's disk under a write, then cut it off.
	old.store.stall()
	go old.n.meta.raft.Apply([]byte("never stored"), 0)
	select {
	case <-old.store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not write")
	}
	old.trans.DisconnectAll()
	for _, m := range members {
		m.trans.Disconnect(old.trans.LocalAddr())
	}
	leader := metaLeader(t, members, old)
	putQueueOn(t, leader, &raftbusv1.QueueProperties{Name: "orders", MaxDeliveryCount: proto.Int32(3)}, false)
	putQueueOn(t, leader, &raftbusv1.QueueProperties{Name: "late"}, true)
	if !old.n.meta.isLeader() || old.n.meta.fsm.Entity("orders").GetQueue().GetMaxDeliveryCount() != 10 {
		t.Fatal("the deposed leader noticed; the test cannot show a stale read")
	}

	read := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t.Cleanup(cancel)
		return asked(ctx)
	}
	q, err := admin.GetQueue(read(), &raftbusv1.GetQueueRequest{Name: "orders"})
	if err == nil {
		t.Fatalf("the deposed leader answered GetQueue with max delivery count %d, the change to 3 unseen", q.GetQueue().GetMaxDeliveryCount())
	}
	if e := apierror.From(err); !e.Retryable || (e.Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER && e.Reason != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY) {
		t.Fatalf("GetQueue on the deposed leader: %v, want a retryable NOT_LEADER or SERVER_BUSY", err)
	}
	list, err := admin.ListQueues(read(), &raftbusv1.ListQueuesRequest{})
	if err == nil {
		t.Fatalf("the deposed leader listed %d queues, missing the one created since", len(list.GetQueues()))
	}
	// Nor does it report itself the leader (raftbus status).
	if id := old.n.confirmedMetaLeader(ctx); id != "" {
		t.Fatalf("the deposed leader reports %q as the metadata leader", id)
	}
	if id := leader.n.confirmedMetaLeader(ctx); id != leader.n.cfg.NodeID {
		t.Fatalf("the leader reports %q as the metadata leader, want itself", id)
	}
	// The current leader answers.
	if q, err := service.NewAdmin(serviceNode{leader.n}, service.Config{}).GetQueue(asked(ctx), &raftbusv1.GetQueueRequest{Name: "orders"}); err != nil || q.GetQueue().GetMaxDeliveryCount() != 3 {
		t.Fatalf("read on the new leader: %v, %v", q, err)
	}
}

// A node whose metadata snapshot cannot be read does not start on it: the
// metadata group is not rebuilt from peers like a partition.
func TestANodeWithADamagedMetadataSnapshotRefusesToStart(t *testing.T) {
	c := newTestCluster(t, 1)
	addr := c.stop(0)
	snap := filepath.Join(c.dir, c.nodeID(0), "meta", "snapshots", "1-10-1700000000000")
	if err := os.MkdirAll(snap, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "meta.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	nd, err := Start(Config{NodeID: c.nodeID(0), ListenAddr: addr, DataDir: filepath.Join(c.dir, c.nodeID(0))})
	if err == nil {
		nd.Close()
		t.Fatal("a node started on a damaged metadata snapshot")
	}
	if !errors.Is(err, partition.ErrDamaged) || !strings.Contains(err.Error(), "restore the data dir from a backup") {
		t.Fatalf("start: %v, want the damage named and what to do", err)
	}
}
