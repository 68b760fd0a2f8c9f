package raftgrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/internal/await"
)

// keySetFSM is a trivial state machine: the set of the commands applied.
// Applying a command twice is harmless, so retried proposals cannot make
// replicas differ.
type keySetFSM struct {
	mu       sync.Mutex
	keys     map[string]bool
	restores int
}

func newKeySetFSM() *keySetFSM { return &keySetFSM{keys: make(map[string]bool)} }

func (f *keySetFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[string(l.Data)] = true
	return nil
}

func (f *keySetFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return keySetSnapshot(f.sortedLocked()), nil
}

func (f *keySetFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	keys := make(map[string]bool)
	scanner := bufio.NewScanner(rc)
	for scanner.Scan() {
		keys[scanner.Text()] = true
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("restore key set: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = keys
	f.restores++
	return nil
}

func (f *keySetFSM) sortedLocked() []string {
	keys := make([]string, 0, len(f.keys))
	for k := range f.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (f *keySetFSM) state() (keys []string, restores int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sortedLocked(), f.restores
}

type keySetSnapshot []string

func (s keySetSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.WriteString(sink, strings.Join(s, "\n")); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s keySetSnapshot) Release() {}

// raftMember is one replica of a test group, with stores that survive a
// restart of its raft.
type raftMember struct {
	node  *testNode
	id    raft.ServerID
	store *raft.InmemStore
	snaps *raft.InmemSnapshotStore
	fsm   *keySetFSM
	raft  *raft.Raft
}

// raftGroup is one Raft group over the gRPC transport of several nodes.
type raftGroup struct {
	name    string
	members []*raftMember
}

func testRaftConfig(t *testing.T, id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	// Snapshots are taken by the test only, and keep few entries behind
	// them, so that a lagging follower needs InstallSnapshot.
	c.SnapshotThreshold = 1 << 30
	c.SnapshotInterval = time.Hour
	c.TrailingLogs = 4
	c.Logger = hclog.New(&hclog.LoggerOptions{Name: string(id), Level: hclog.Error, Output: testLogWriter{t}})
	return c
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startRaftGroup bootstraps group on nodes and starts its replicas; t.Cleanup
// shuts them down.
func startRaftGroup(t *testing.T, group string, nodes []*testNode) *raftGroup {
	t.Helper()
	g := &raftGroup{name: group}
	var configuration raft.Configuration
	for i, n := range nodes {
		m := &raftMember{
			node:  n,
			id:    raft.ServerID(fmt.Sprintf("%s-node-%d", group, i)),
			store: raft.NewInmemStore(),
			snaps: raft.NewInmemSnapshotStore(),
		}
		g.members = append(g.members, m)
		configuration.Servers = append(configuration.Servers, raft.Server{Suffrage: raft.Voter, ID: m.id, Address: n.addr})
	}
	for _, m := range g.members {
		trans, err := m.node.mux.Transport(group)
		if err != nil {
			t.Fatal(err)
		}
		if err := raft.BootstrapCluster(testRaftConfig(t, m.id), m.store, m.store, m.snaps, trans, configuration); err != nil {
			t.Fatalf("bootstrap %s: %v", m.id, err)
		}
		m.start(t, trans)
	}
	t.Cleanup(func() {
		for _, m := range g.members {
			m.stop(t)
		}
	})
	return g
}

// start runs the member's raft over trans with a fresh state machine.
func (m *raftMember) start(t *testing.T, trans *GroupTransport) {
	t.Helper()
	m.fsm = newKeySetFSM()
	r, err := raft.NewRaft(testRaftConfig(t, m.id), m.fsm, m.store, m.store, m.snaps, trans)
	if err != nil {
		t.Fatalf("start raft %s: %v", m.id, err)
	}
	m.raft = r
}

// stop shuts the member's raft down, which closes its transport.
func (m *raftMember) stop(t *testing.T) {
	if m.raft == nil {
		return
	}
	if err := m.raft.Shutdown().Error(); err != nil {
		t.Errorf("shutdown %s: %v", m.id, err)
	}
	m.raft = nil
}

func (g *raftGroup) waitLeader(t *testing.T) *raftMember {
	t.Helper()
	var leader *raftMember
	await.Until(t, 10*time.Second, "a leader of "+g.name, func() bool {
		for _, m := range g.members {
			if m.raft != nil && m.raft.State() == raft.Leader {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

// apply proposes keys through the leader, finding the leader again when
// leadership moves.
func (g *raftGroup) apply(t *testing.T, keys ...string) {
	t.Helper()
	for _, key := range keys {
		for attempt := 0; ; attempt++ {
			err := g.waitLeader(t).raft.Apply([]byte(key), 5*time.Second).Error()
			if err == nil {
				break
			}
			if attempt == 5 || !(errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost)) {
				t.Fatalf("apply %s to %s: %v", key, g.name, err)
			}
		}
	}
}

// waitReplicated waits until every running member has applied exactly want.
func (g *raftGroup) waitReplicated(t *testing.T, want []string) {
	t.Helper()
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	for _, m := range g.members {
		if m.raft == nil {
			continue
		}
		await.Until(t, 10*time.Second, fmt.Sprintf("%s to apply %d keys", m.id, len(want)), func() bool {
			got, _ := m.fsm.state()
			return strings.Join(got, ",") == strings.Join(sorted, ",")
		})
	}
}

func keys(prefix string, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

func startNodes(t *testing.T, n int) []*testNode {
	nodes := make([]*testNode, n)
	for i := range nodes {
		nodes[i] = startNode(t, Config{Timeout: 2 * time.Second})
	}
	return nodes
}

func TestRaftReplicatesAndRestartedFollowerCatchesUpBySnapshot(t *testing.T) {
	nodes := startNodes(t, 3)
	g := startRaftGroup(t, "orders/0", nodes)

	leader := g.waitLeader(t)
	g.apply(t, keys("before", 0, 10)...)
	g.waitReplicated(t, keys("before", 0, 10))

	var follower *raftMember
	for _, m := range g.members {
		if m != leader {
			follower = m
			break
		}
	}
	follower.stop(t)

	// While the follower is down the leader moves on, snapshots and
	// truncates its log past everything the follower has.
	g.apply(t, keys("during", 0, 30)...)
	leader = g.waitLeader(t)
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot on leader: %v", err)
	}
	first, err := leader.store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	followerLast, err := follower.store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= followerLast+1 {
		t.Fatalf("leader's log starts at %d, the follower has up to %d: no snapshot needed", first, followerLast)
	}

	trans, err := follower.node.mux.Transport(g.name)
	if err != nil {
		t.Fatalf("reopen transport: %v", err)
	}
	follower.start(t, trans)
	g.apply(t, keys("after", 0, 5)...)

	all := append(append(keys("before", 0, 10), keys("during", 0, 30)...), keys("after", 0, 5)...)
	g.waitReplicated(t, all)
	if _, restores := follower.fsm.state(); restores == 0 {
		t.Fatalf("the restarted follower caught up without installing a snapshot")
	}
}

func TestTwoRaftGroupsShareTheNodesConnections(t *testing.T) {
	nodes := startNodes(t, 3)
	groups := []*raftGroup{startRaftGroup(t, "meta", nodes), startRaftGroup(t, "orders/1", nodes)}

	t.Run("replicate", func(t *testing.T) {
		for _, g := range groups {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				g.apply(t, keys(g.name, 0, 25)...)
				g.waitReplicated(t, keys(g.name, 0, 25))
			})
		}
	})
	for _, n := range nodes {
		if dials := n.mux.dials.Load(); dials > int64(len(nodes)-1) {
			t.Errorf("node %s dialled %d connections for %d peers", n.addr, dials, len(nodes)-1)
		}
	}
}
