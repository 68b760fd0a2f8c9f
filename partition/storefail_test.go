package partition_test

import (
	"bytes"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
)

// lockedBuffer is a buffer a logger writes and a test reads at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf.Bytes(), []byte(s))
}

// A replica whose log failed cannot store a new term, and hashicorp/raft
// panics when it cannot. The replica comes to one at the next election
// (its own, or a vote asked of it): it must stop taking part there and
// close in time, not take the process (this test binary) down.
func TestAReplicaThatCannotStoreATermStopsWithoutAPanic(t *testing.T) {
	logs := map[string]*lockedBuffer{}
	c, gates := syncGatedCluster(t, func(cfg *partition.Config) {
		logs[cfg.NodeID] = &lockedBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.NodeID], nil))
	})
	l := c.leader()
	f := (l + 1) % 3
	gates[f].Fail(errors.New("disk gone"))
	c.kill(l) // the two left hold an election in a newer term

	await.Until(t, 10*time.Second, "the replica whose log failed to meet a newer term", func() bool {
		return logs[nodeID(f)].contains("cannot store a new term")
	})
	closed := make(chan error, 1)
	go func() { closed <- c.replicas[f].Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close the replica that could not store a term: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the replica that could not store a term did not close in 20s")
	}
}
