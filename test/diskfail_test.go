package test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestANodeWhoseDiskFailsStopsAndComesBack runs three nodes each on a disk
// of its own and fails one node's disk under load, as ext4 fails a file
// system whose disk errs (procs.Cluster.FailDisk). The node must stop by
// itself and say why, the other two must go on serving, and once the disk
// is back the node must start on what it had synced, catch up and lead
// again, and no acknowledged message may be lost or come back wrong.
func TestANodeWhoseDiskFailsStopsAndComesBack(t *testing.T) {
	if err := procs.DisksSupported(); err != nil {
		t.Skipf("nodes cannot have disks of their own here: %v", err)
	}
	c := procs.StartWith(t, raftbusd, 3, procs.Options{Disks: true})
	w := newCorruptionWorkload(t, c)
	victim := w.preferredLeader(0)
	for i := range 60 {
		w.send(fmt.Sprintf("a%03d", i), uint32(i%3))
	}
	w.awaitRebuilt(victim) // it leads partition 0

	if err := c.FailDisk(victim); err != nil {
		t.Fatal(err)
	}
	failed := time.Now()
	// The node notices at its next write: every partition has a replica on
	// it, so every send makes one.
	for i := 0; !c.WaitExit(victim, 10*time.Millisecond); i++ {
		if time.Since(failed) > 30*time.Second {
			t.Fatalf("%s still runs %v after its disk failed", c.Nodes[victim].ID, time.Since(failed).Round(time.Second))
		}
		w.send(fmt.Sprintf("b%03d", i), uint32(i%3))
	}
	t.Logf("%s stopped %v after its disk failed", c.Nodes[victim].ID, time.Since(failed).Round(time.Millisecond))
	awaitLog(t, c.Nodes[victim].LogPath, "no replica on this node can store anything more", 5*time.Second)

	// The other two serve every partition.
	for i := range 60 {
		w.send(fmt.Sprintf("c%03d", i), uint32(i%3))
	}

	if err := c.RepairDisk(victim); err != nil {
		t.Fatal(err)
	}
	c.Restart(victim)
	c.WaitReady(victim, 60*time.Second)
	for i := range 30 {
		w.send(fmt.Sprintf("d%03d", i), uint32(i%3))
	}
	w.awaitRebuilt(victim)
	w.drain(victim)
	w.check()
}

// TestAMetadataLeaderWhoseDiskFailsStopsAndComesBack fails the disk of
// the node leading the metadata group of a cluster with no queue yet, so
// that the metadata log (not the node log) is the first to write to it.
// The node must stop by itself and say why, as it does for the node log,
// rather than go on without a metadata log or panic; the other two must
// take the change, and the node must come back with it once its disk is.
func TestAMetadataLeaderWhoseDiskFailsStopsAndComesBack(t *testing.T) {
	if err := procs.DisksSupported(); err != nil {
		t.Skipf("nodes cannot have disks of their own here: %v", err)
	}
	c := procs.StartWith(t, raftbusd, 3, procs.Options{Disks: true})
	victim := -1
	await.Until(t, 30*time.Second, "a metadata leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := raftbusv1.NewAdminServiceClient(c.Conn(0)).GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		for _, n := range info.GetNodes() {
			if err == nil && n.GetMetadataLeader() {
				victim = slices.IndexFunc(c.Nodes, func(p *procs.Node) bool { return p.ID == n.GetNodeId() })
			}
		}
		return victim >= 0
	})
	if err := c.FailDisk(victim); err != nil {
		t.Fatal(err)
	}
	other := raftbusv1.NewAdminServiceClient(c.Conn((victim + 1) % 3))
	create := func(name string) {
		createQueue(t, other, 60*time.Second, &raftbusv1.QueueProperties{Name: name})
	}
	create("during")
	if !c.WaitExit(victim, 30*time.Second) {
		t.Fatalf("%s still runs 30s after its disk failed", c.Nodes[victim].ID)
	}
	awaitLog(t, c.Nodes[victim].LogPath, "this node can take no more part in the cluster's metadata", 5*time.Second)
	if c.Logged("panic: ") {
		t.Fatal("a node panicked")
	}
	create("after")

	if err := c.RepairDisk(victim); err != nil {
		t.Fatal(err)
	}
	c.Restart(victim)
	c.WaitReady(victim, 60*time.Second)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(victim))
	await.Until(t, 30*time.Second, "the restarted node to know both queues", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, name := range []string{"during", "after"} {
			if _, err := admin.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: name}); err != nil {
				return false
			}
		}
		return true
	})
}
