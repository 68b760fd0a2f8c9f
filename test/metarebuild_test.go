package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestADamagedMetadataLogIsRebuiltFromThePeers damages an entry of a
// stopped node's metadata log (a byte of a queue's name, which bbolt does
// not check and the entry's checksum does), and a partition replica in its
// node log. The node must not start on them, nor refuse to start: it has the metadata leader make it a
// non-voter, starts on an empty metadata log that the others fill, votes
// again, serves its partitions and leads its own again, and nothing
// acknowledged is lost or comes back wrong.
func TestADamagedMetadataLogIsRebuiltFromThePeers(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	w := newCorruptionWorkload(t, c)
	const marked = "audit-trail-queue"
	createQueue(t, w.admin, 30*time.Second, &raftbusv1.QueueProperties{Name: marked})
	victim := w.preferredLeader(0)
	for i := range 60 {
		w.send(fmt.Sprintf("a%03d", i), uint32(i%3))
	}
	w.awaitApplied(victim)
	if err := c.Terminate(victim, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	metaDB := filepath.Join(c.Nodes[victim].DataDir, "meta", "raft.db")
	b, err := os.ReadFile(metaDB)
	if err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for at := 0; ; {
		k := bytes.Index(b[at:], []byte(marked))
		if k < 0 {
			break
		}
		writeAt(t, metaDB, at+k+3, []byte{b[at+k+3] ^ 0x20})
		flipped++
		at += k + 1
	}
	if flipped == 0 {
		t.Fatalf("%q is nowhere in %s", marked, metaDB)
	}
	t.Logf("flipped a bit in %d copies of %q in %s", flipped, marked, metaDB)
	// Its replica of partition 0 is damaged too: until the rebuilt
	// metadata log has a configuration, the node must not take itself for
	// a cluster of one with nothing to rebuild that replica from.
	t.Logf("and in its node log: %s", corruptions[0].corrupt(t, c.Nodes[victim].DataDir, w.sentTo[0]))

	c.Restart(victim)
	c.WaitReady(victim, 60*time.Second)
	awaitLog(t, c.Nodes[victim].LogPath, "the metadata log is damaged: this node rebuilds it from the other nodes", 5*time.Second)
	if !c.Logged("a member rebuilds its damaged metadata log") {
		t.Error("no metadata leader logged making the damaged member a non-voter")
	}
	if _, err := os.Stat(filepath.Join(c.Nodes[victim].DataDir, "meta.damaged", "raft.db")); err != nil {
		t.Errorf("the damaged metadata log was not kept aside: %v", err)
	}
	for i := range 30 {
		w.send(fmt.Sprintf("b%03d", i), uint32(i%3))
	}
	id := c.Nodes[victim].ID
	w.await(id+" to vote in the metadata group again", 60*time.Second, func(info *raftbusv1.GetClusterInfoResponse) bool {
		for _, n := range info.GetNodes() {
			if n.GetNodeId() == id {
				return n.GetMetadataVoter()
			}
		}
		return false
	})
	w.awaitRebuilt(victim) // every replica healthy, and it leads partition 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q, err := raftbusv1.NewAdminServiceClient(c.Conn(victim)).GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: marked})
	if err != nil || q.GetQueue().GetName() != marked {
		t.Fatalf("the rebuilt node's view of queue %s: %v, %v", marked, q, err)
	}
	w.drain(victim)
	w.check()
}
