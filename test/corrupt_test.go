package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// bodyOf is the body sent with message id: distinct per message and long
// enough to find on disk.
func bodyOf(id string) []byte {
	return []byte(fmt.Sprintf("<%s|%s>", id, strings.Repeat(id, 200/len(id)+1)))
}

// nodeLogData returns the segment files of a node's log with their data
// (what lies before the zeros they are preallocated with).
func nodeLogData(t *testing.T, dataDir string) (paths []string, data [][]byte) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "log", "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no node log segments")
	}
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		end := len(b)
		for end > 0 && b[end-1] == 0 {
			end--
		}
		paths = append(paths, s)
		data = append(data, b[:end])
	}
	return paths, data
}

func writeAt(t *testing.T, path string, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}

// batchStarts are the offsets of the batch headers in a segment's data.
func batchStarts(data []byte) []int {
	var out []int
	for i := 0; ; {
		k := bytes.Index(data[i:], []byte("RBLOGBAT"))
		if k < 0 {
			return out
		}
		out = append(out, i+k)
		i += k + 1
	}
}

// corruptions are the ways a stopped node's log is damaged. Each reports
// what it did.
var corruptions = []struct {
	name    string
	corrupt func(t *testing.T, dataDir string, sentTo0 []string) string
}{
	{"bit flips in message bodies", func(t *testing.T, dataDir string, sentTo0 []string) string {
		paths, data := nodeLogData(t, dataDir)
		flipped := 0
		for _, id := range sentTo0[:10] {
			for k, d := range data {
				if i := bytes.Index(d, bodyOf(id)); i >= 0 {
					writeAt(t, paths[k], i+20, []byte{d[i+20] ^ 0x04})
					flipped++
					break
				}
			}
		}
		if flipped == 0 {
			t.Fatal("no message body found in the node log")
		}
		return fmt.Sprintf("%d bodies", flipped)
	}},
	{"bit flips in headers", func(t *testing.T, dataDir string, _ []string) string {
		paths, data := nodeLogData(t, dataDir)
		starts := batchStarts(data[0])
		if len(starts) < 10 {
			t.Fatalf("only %d batches", len(starts))
		}
		// A batch header, and the first record header of another batch.
		b := starts[len(starts)/3]
		writeAt(t, paths[0], b+20, []byte{data[0][b+20] ^ 0x01})
		r := starts[2*len(starts)/3]
		hlen := int(data[0][r+12]) | int(data[0][r+13])<<8
		rec := r + 16 + hlen
		writeAt(t, paths[0], rec+18, []byte{data[0][rec+18] ^ 0x01})
		return fmt.Sprintf("batch header at %d, record header at %d", b, rec)
	}},
	{"a segment cut short", func(t *testing.T, dataDir string, _ []string) string {
		paths, data := nodeLogData(t, dataDir)
		at := len(data[0]) * 3 / 5
		if err := os.Truncate(paths[0], int64(at)); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("cut at %d of %d bytes", at, len(data[0]))
	}},
	{"a zeroed block", func(t *testing.T, dataDir string, _ []string) string {
		paths, data := nodeLogData(t, dataDir)
		at := len(data[0]) * 2 / 5 &^ 4095
		writeAt(t, paths[0], at, make([]byte, 4096))
		return fmt.Sprintf("4 KiB zeroed at %d", at)
	}},
}

// TestCorruptedReplicaIsRebuiltNeverServed damages the node log of one
// node of three (the preferred leader of partition 0) in several ways
// while it is stopped, restarts it, and checks that it reports its
// replicas damaged, rebuilds them from the others, leads partition 0
// again, and that no consumer ever receives a body other than the one
// sent, and no acknowledged message is lost.
func TestCorruptedReplicaIsRebuiltNeverServed(t *testing.T) {
	for _, tc := range corruptions {
		t.Run(tc.name, func(t *testing.T) {
			c := procs.Start(t, raftbusd, 3)
			w := newCorruptionWorkload(t, c)
			victim := w.preferredLeader(0)
			for i := range 150 {
				w.send(fmt.Sprintf("a%03d", i), uint32(i%3))
			}
			w.awaitApplied(victim)
			if err := c.Terminate(victim, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("damaged %s's log: %s", c.Nodes[victim].ID, tc.corrupt(t, c.Nodes[victim].DataDir, w.sentTo[0]))
			c.Restart(victim)
			c.WaitReady(victim, 60*time.Second)
			awaitLog(t, c.Nodes[victim].LogPath, "partition replica damaged", 60*time.Second)
			for i := range 60 {
				w.send(fmt.Sprintf("b%03d", i), uint32(i%3))
			}
			// Nothing is received before the damaged node leads partition
			// 0 again: every message of it then comes from that node's
			// state.
			w.awaitRebuilt(victim)
			w.drain(victim)
			w.check()
		})
	}
}

// corruptionWorkload sends messages with known bodies and receives them,
// remembering what was acknowledged and what arrived.
type corruptionWorkload struct {
	t      *testing.T
	c      *procs.Cluster
	admin  raftbusv1.AdminServiceClient
	msgs   []raftbusv1.MessagingServiceClient
	mu     sync.Mutex
	acked  map[string]bool
	got    map[string]bool
	wrong  []string
	sentTo [3][]string
}

func newCorruptionWorkload(t *testing.T, c *procs.Cluster) *corruptionWorkload {
	w := &corruptionWorkload{t: t, c: c, acked: map[string]bool{}, got: map[string]bool{}}
	w.admin = raftbusv1.NewAdminServiceClient(c.Conn(0))
	for i := range c.Nodes {
		w.msgs = append(w.msgs, raftbusv1.NewMessagingServiceClient(c.Conn(i)))
	}
	createQueue(t, w.admin, 30*time.Second, &raftbusv1.QueueProperties{
		Name: "orders", PartitionCount: proto.Uint32(3), RequiresDuplicateDetection: proto.Bool(true),
		LockDuration: durationpb.New(5 * time.Second),
	})
	return w
}

// preferredLeader is the node first in partition p's placement.
func (w *corruptionWorkload) preferredLeader(p int) int {
	var i int
	call(w.t, 30*time.Second, func(ctx context.Context) error {
		table, err := w.admin.GetRoutingTable(ctx, &raftbusv1.GetRoutingTableRequest{EntityPath: "orders"})
		if err != nil {
			return err
		}
		i = w.c.IndexOf(table.GetEntities()[0].GetPartitions()[p].GetReplicaAddresses()[0])
		return nil
	})
	return i
}

// send sends message id to partition p through any node until it is
// acknowledged (a resend after an unknown outcome is a duplicate).
func (w *corruptionWorkload) send(id string, p uint32) {
	k := len(id)
	call(w.t, 60*time.Second, func(ctx context.Context) error {
		k++
		_, err := w.msgs[k%len(w.msgs)].Send(ctx, &raftbusv1.SendRequest{EntityPath: "orders", PartitionId: &p,
			Messages: []*raftbusv1.Message{{MessageId: id, Body: bodyOf(id)}}})
		return err
	})
	w.mu.Lock()
	w.acked[id] = true
	w.sentTo[p] = append(w.sentTo[p], id)
	w.mu.Unlock()
}

// received checks one delivery.
func (w *corruptionWorkload) received(m *raftbusv1.ReceivedMessage) {
	id := m.GetMessage().GetMessageId()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !bytes.Equal(m.GetMessage().GetBody(), bodyOf(id)) {
		w.wrong = append(w.wrong, fmt.Sprintf("%s (partition %d): %q", id, m.GetPartitionId(), m.GetMessage().GetBody()))
	}
	w.got[id] = true
}

// consume receives and completes through node i until ctx ends.
func (w *corruptionWorkload) consume(ctx context.Context, i int) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := w.msgs[i].Receive(rctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: 20, MaxWait: durationpb.New(500 * time.Millisecond)})
		cancel()
		if err != nil {
			continue
		}
		for _, m := range resp.GetMessages() {
			w.received(m)
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			w.msgs[i].Complete(cctx, &raftbusv1.CompleteRequest{Lock: &raftbusv1.MessageLock{EntityPath: "orders", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}})
			cancel()
		}
	}
}

// drain receives through node i until every acknowledged message arrived.
func (w *corruptionWorkload) drain(i int) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		missing := 0
		for id := range w.acked {
			if !w.got[id] {
				missing++
			}
		}
		w.mu.Unlock()
		if missing == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		w.consume(ctx, i)
		cancel()
	}
}

func (w *corruptionWorkload) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.wrong {
		w.t.Errorf("a consumer received a body other than the one sent: %s", s)
	}
	for id := range w.acked {
		if !w.got[id] {
			w.t.Errorf("acknowledged message %s was lost", id)
		}
	}
}

// replicaStates asks node i for every replica's role, health and applied
// index, and each partition's leader and commit index.
func (w *corruptionWorkload) clusterInfo(i int) *raftbusv1.GetClusterInfoResponse {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := raftbusv1.NewAdminServiceClient(w.c.Conn(i)).GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
	if err != nil {
		return nil
	}
	return info
}

// awaitApplied waits until node v has applied everything its partitions'
// leaders committed.
func (w *corruptionWorkload) awaitApplied(v int) {
	id := w.c.Nodes[v].ID
	w.await("every partition applied on "+id, 60*time.Second, func(info *raftbusv1.GetClusterInfoResponse) bool {
		for _, p := range info.GetPartitions() {
			if p.GetEntityPath() != "orders" {
				continue
			}
			for _, r := range p.GetReplicas() {
				if r.GetNodeId() == id && (p.GetCommitIndex() == 0 || r.GetAppliedIndex() < p.GetCommitIndex()) {
					return false
				}
			}
		}
		return true
	})
}

// awaitRebuilt waits until every replica is healthy and node v leads
// partition 0 again (it is its preferred leader).
func (w *corruptionWorkload) awaitRebuilt(v int) {
	id := w.c.Nodes[v].ID
	w.await(id+" to be healthy and lead partition 0", 120*time.Second, func(info *raftbusv1.GetClusterInfoResponse) bool {
		for _, p := range info.GetPartitions() {
			for _, r := range p.GetReplicas() {
				if r.GetHealth() != raftbusv1.ReplicaHealth_REPLICA_HEALTH_HEALTHY {
					return false
				}
			}
			if p.GetEntityPath() == "orders" && p.GetPartitionId() == 0 && p.GetLeaderNodeId() != id {
				return false
			}
		}
		return true
	})
}

func (w *corruptionWorkload) await(what string, timeout time.Duration, cond func(*raftbusv1.GetClusterInfoResponse) bool) {
	w.t.Helper()
	await.Until(w.t, timeout, what, func() bool {
		for i := range w.c.Nodes {
			if info := w.clusterInfo(i); info != nil && cond(info) {
				return true
			}
		}
		return false
	})
}

// awaitLog waits until a node's log file holds text.
func awaitLog(t *testing.T, path, text string, timeout time.Duration) {
	t.Helper()
	await.Until(t, timeout, fmt.Sprintf("%s to log %q", path, text), func() bool {
		b, _ := os.ReadFile(path)
		return bytes.Contains(b, []byte(text))
	})
}
