package partition_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// snapshotted runs three replicas with small snapshot settings, makes one
// follower take a snapshot of sixty sends and stops it. It returns the
// cluster and the stopped follower.
func snapshotted(t *testing.T, tune func(*partition.Config)) (*testCluster, int) {
	c := newTestCluster(t, 3, func(cfg *partition.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 20, 5
		if tune != nil {
			tune(cfg)
		}
	})
	configure(t, c.replicas[c.leader()], nil)
	for i := range 60 {
		c.send(strconv.Itoa(i))
	}
	c.converged()
	l := c.leader()
	f := (l + 1) % 3
	if err := c.replicas[f].Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	c.kill(f)
	return c, f
}

// newestSnapshot is the directory of replica i's newest snapshot.
func newestSnapshot(t *testing.T, c *testCluster, i int) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(c.dirs[i], "snapshots", "snapshots", "*"))
	slices.Sort(dirs) // ids start with term and index, fixed width enough here
	if len(dirs) == 0 {
		t.Fatal("no snapshot")
	}
	return dirs[len(dirs)-1]
}

func TestDamagedStoredStateIsNotStarted(t *testing.T) {
	cases := map[string]func(t *testing.T, snap string){
		"snapshot fails its checksum": func(t *testing.T, snap string) {
			path := filepath.Join(snap, "state.bin")
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 1
			os.WriteFile(path, b, 0o640)
		},
		"snapshot metadata unreadable": func(t *testing.T, snap string) {
			os.WriteFile(filepath.Join(snap, "meta.json"), []byte(`{"ID": "x", "Index": 1`), 0o640)
		},
		"snapshots gone, log compacted": func(t *testing.T, snap string) {
			os.RemoveAll(filepath.Dir(snap))
		},
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			c, f := snapshotted(t, nil)
			corrupt(t, newestSnapshot(t, c, f))
			_, err := c.open(f)
			if !errors.Is(err, partition.ErrDamaged) {
				t.Fatalf("open of a damaged replica: %v", err)
			}
		})
	}
}

func TestUndamagedSnapshotReopens(t *testing.T) {
	c, f := snapshotted(t, nil)
	c.start(f)
	c.converged()
}

// A leader whose snapshot is found damaged when it reads it to send it to
// a follower that fell behind reports the damage.
func TestSnapshotDamagedWhenSentIsReported(t *testing.T) {
	reports := make(chan error, 10)
	c, f := snapshotted(t, func(cfg *partition.Config) {
		cfg.OnDamage = func(err error) { reports <- err }
	})
	for i := range 40 {
		c.send("more" + strconv.Itoa(i))
	}
	l := c.leader()
	p := c.replicas[l]
	if err := p.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	path := filepath.Join(newestSnapshot(t, c, l), "state.bin")
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 1
	os.WriteFile(path, b, 0o640)
	c.start(f) // behind the leader's log: needs the snapshot
	err := <-reports
	if !errors.Is(err, partition.ErrDamaged) {
		t.Fatalf("report: %v", err)
	}
}

// send sends one message through whichever replica leads, again while the
// outcome is a retryable failure (a leader change on a loaded machine).
func (c *testCluster) send(id string) {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := c.replicas[c.leader()].Apply(context.Background(), sendCmd(&raftbusv1.Message{MessageId: id, Body: []byte("x")}))
		var pe *partition.Error
		if err == nil || attempt == 10 || !errors.As(err, &pe) || !pe.Retryable {
			if err != nil {
				c.t.Fatalf("send %s: %v", id, err)
			}
			return
		}
	}
}
