package cluster

import (
	"strings"
	"syscall"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog/raftlogtest"
)

// TestANodeWhoseDiskFailsAWriteStops: when a node's log fails a write,
// the node stops on its own and says what to do, rather than staying up
// with every replica on it stuck; the other nodes go on serving.
func TestANodeWhoseDiskFailsAWriteStops(t *testing.T) {
	disk := &raftlogtest.Disk{}
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		if cfg.NodeID == "n3" {
			cfg.nodeLogFS = disk
		}
	})
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders"})
	sendOne(t, c.client(0), "orders", "before")

	disk.Fail(syscall.EIO)
	// n3 holds a replica of the queue's partition: the send reaches its log.
	sendOne(t, c.client(0), "orders", "during")
	select {
	case err := <-c.nodes[2].Failed():
		for _, want := range []string{syscall.EIO.Error(), "Check the disk under " + c.nodes[2].nodeLogDir()} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("the node stopped with %q, want it to say %q", err, want)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the node whose disk fails is still running 20s later")
	}
	sendOne(t, c.client(1), "orders", "after")
	if got := drain(t, c.client(0), "orders", 3, 20*time.Second); len(got) != 3 {
		t.Fatalf("received %v, want before, during and after", got)
	}
}
