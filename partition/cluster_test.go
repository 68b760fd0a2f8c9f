package partition_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	"github.com/raftbus/raftbus/raftlog"
)

// testCluster is three replicas of one partition over raft's in-memory
// transport, each with a node log and snapshots of its own in a temp
// directory (real files, fsync on).
type testCluster struct {
	t        testing.TB
	name     string
	dirs     []string
	trans    []*raft.InmemTransport
	logs     []*raftlog.Log
	replicas []*partition.Partition
	tune     func(*partition.Config)
	// fs, when set, gives the file system of node i's log.
	fs func(i int) raftlog.FS
}

func newTestCluster(t testing.TB, n int, tune func(*partition.Config)) *testCluster {
	t.Helper()
	return newTestClusterOn(t, n, tune, nil)
}

// newTestClusterOn is newTestCluster with the node logs on the file
// systems fs gives (the operating system's for nil).
func newTestClusterOn(t testing.TB, n int, tune func(*partition.Config), fs func(i int) raftlog.FS) *testCluster {
	t.Helper()
	c := &testCluster{t: t, name: "orders/0", tune: tune, fs: fs}
	base := t.TempDir()
	for i := range n {
		c.dirs = append(c.dirs, filepath.Join(base, fmt.Sprintf("node%d", i)))
	}
	c.replicas = make([]*partition.Partition, n)
	c.trans = make([]*raft.InmemTransport, n)
	c.logs = make([]*raftlog.Log, n)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.closeAll)
	return c
}

func nodeID(i int) string { return fmt.Sprintf("node%d", i) }

func (c *testCluster) servers() []raft.Server {
	var s []raft.Server
	for i := range c.dirs {
		s = append(s, raft.Server{ID: raft.ServerID(nodeID(i)), Address: raft.ServerAddress(nodeID(i))})
	}
	return s
}

// start opens replica i from its directory and connects its transport to
// every running replica.
func (c *testCluster) start(i int) {
	c.t.Helper()
	p, err := c.open(i)
	if err != nil {
		c.t.Fatalf("open replica %d: %v", i, err)
	}
	c.replicas[i] = p
}

// open opens replica i as start does, and returns what partition.Open
// returned.
func (c *testCluster) open(i int) (*partition.Partition, error) {
	c.t.Helper()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(nodeID(i)))
	c.trans[i] = tr
	for j, other := range c.trans {
		if j != i && other != nil {
			tr.Connect(other.LocalAddr(), other)
			other.Connect(tr.LocalAddr(), tr)
		}
	}
	if c.logs[i] == nil {
		var opts raftlog.Options
		if c.fs != nil {
			opts.FS = c.fs(i)
		}
		l, err := raftlog.Open(filepath.Join(c.dirs[i], "log"), opts)
		if err != nil {
			c.t.Fatalf("open node log %d: %v", i, err)
		}
		c.logs[i] = l
	}
	g, err := c.logs[i].Group(c.name)
	if err != nil {
		c.t.Fatalf("node log %d: %v", i, err)
	}
	cfg := partition.Config{
		Name:               c.name,
		PartitionID:        0,
		PartitionCount:     1,
		NodeID:             nodeID(i),
		Dir:                filepath.Join(c.dirs[i], "snapshots"),
		Log:                g,
		Stable:             g,
		Transport:          tr,
		Bootstrap:          c.servers(),
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	return partition.Open(cfg)
}

// productionTimings gives cfg raft's production timings in place of the
// test cluster's quick ones, for a test in which the leader must stay the
// leader: a 50 ms lease makes it step down whenever a loaded machine does
// not run it for that long.
func productionTimings(cfg *partition.Config) {
	cfg.HeartbeatTimeout = partition.DefaultHeartbeatTimeout
	cfg.ElectionTimeout = partition.DefaultElectionTimeout
	cfg.LeaderLeaseTimeout = partition.DefaultLeaderLeaseTimeout
}

// kill stops replica i as a crash would look to its peers: it is cut off
// first, then shut down without a leadership handover.
func (c *testCluster) kill(i int) {
	c.t.Helper()
	c.isolate(i)
	c.shutDown(i)
}

// isolate cuts replica i off from its peers, both ways.
func (c *testCluster) isolate(i int) {
	c.trans[i].DisconnectAll()
	for j, other := range c.trans {
		if j != i && other != nil {
			other.Disconnect(c.trans[i].LocalAddr())
		}
	}
}

// shutDown closes replica i and its node log.
func (c *testCluster) shutDown(i int) {
	if err := c.replicas[i].Close(); err != nil {
		c.t.Logf("close replica %d: %v", i, err)
	}
	c.replicas[i] = nil
	c.trans[i] = nil
	c.closeLog(i)
}

func (c *testCluster) closeLog(i int) {
	if c.logs[i] != nil {
		if err := c.logs[i].Close(); err != nil {
			c.t.Logf("close node log %d: %v", i, err)
		}
		c.logs[i] = nil
	}
}

func (c *testCluster) closeAll() {
	for i, p := range c.replicas {
		if p != nil {
			if err := p.Close(); err != nil {
				c.t.Logf("close replica %d: %v", i, err)
			}
			c.replicas[i] = nil
		}
		c.closeLog(i)
	}
}

// leader waits until exactly one running replica leads and is ready to serve
// reads, and returns its index.
func (c *testCluster) leader() int {
	c.t.Helper()
	var found int
	await.Until(c.t, 10*time.Second, "a leader", func() bool {
		found = -1
		for i, p := range c.replicas {
			if p != nil && p.IsLeader() {
				if found >= 0 {
					return false
				}
				found = i
			}
		}
		return found >= 0 && c.replicas[found].Read(context.Background(), func(*engine.Engine) {}) == nil
	})
	return found
}

// converged waits until every running replica applied the same log and
// holds the same state.
func (c *testCluster) converged() {
	c.t.Helper()
	await.Until(c.t, 10*time.Second, "replicas to converge", func() bool {
		var want *partition.Info
		var digest [32]byte
		for _, p := range c.replicas {
			if p == nil {
				continue
			}
			info := p.Info()
			if want == nil {
				want, digest = &info, p.Digest()
				continue
			}
			if info.AppliedIndex != want.AppliedIndex || p.Digest() != digest {
				return false
			}
		}
		return true
	})
}
