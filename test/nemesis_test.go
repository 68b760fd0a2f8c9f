package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/history"
	"github.com/raftbus/raftbus/test/nemesis"
	"github.com/raftbus/raftbus/test/netns"
	"github.com/raftbus/raftbus/test/procs"
)

// nemesisQueue is the queue the nemesis aims its leader faults at; its
// name is long enough for the metadata corruption to find (see
// nemesis.CorruptMeta).
const nemesisQueue = "nemesis-queue"

func TestNemesisHealsWhatItBreaks(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{Name: nemesisQueue, PartitionCount: proto.Uint32(2)})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n := &nemesis.Nemesis{Cluster: c, Entity: nemesisQueue, Kinds: nemesis.ProcessKinds, Rand: rand.New(rand.NewPCG(1, 2)), History: rec, Log: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	faults, err := n.Run(ctx, 200*time.Millisecond, time.Second)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if faults < 2 {
		t.Fatalf("%d faults injected in 6s", faults)
	}
	checkHealed(t, c, rec, path, faults)
}

// TestEveryFaultHeals injects each kind of fault once into five nodes in
// network namespaces (two of five down, a skewed clock, bridge and ring
// partitions, lossy and slow links, a failed disk among them) and checks that each is
// recorded, healed and leaves a cluster that serves.
func TestEveryFaultHeals(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	nw, err := netns.New(fmt.Sprintf("n%d", os.Getpid()%10000), 100+os.Getpid()%50, 5)
	if err != nil {
		t.Fatal(err)
	}
	var opts procs.Options
	kinds := append(slices.Clip(nemesis.ProcessKinds), nemesis.NetworkKinds...)
	if err := procs.DisksSupported(); err == nil {
		opts.Disks = true
		kinds = append(kinds, nemesis.DiskKinds...)
	} else {
		t.Logf("disk faults skipped: %v", err)
	}
	c := procs.StartOnWith(t, raftbusd, nw.Hosts(), opts)
	t.Cleanup(func() {
		for i := range c.Nodes {
			c.Kill(i)
		}
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{Name: nemesisQueue, PartitionCount: proto.Uint32(2)})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n := &nemesis.Nemesis{Cluster: c, Network: nw, Entity: nemesisQueue, Rand: rand.New(rand.NewPCG(3, 4)), History: rec, Log: t.Logf}
	faults := 0
	for _, k := range kinds {
		// A fault aimed at a leader needs one to be known: right after the
		// previous fault healed, an election may still be under way.
		var applied bool
		for deadline := time.Now().Add(15 * time.Second); !applied && time.Now().Before(deadline); {
			applied, err = n.Once(context.Background(), k, 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if !applied {
				time.Sleep(100 * time.Millisecond) // polling for a leader; there is no event to await across processes
			}
		}
		if !applied {
			t.Errorf("fault %s could not be applied to a healthy five-node cluster", k)
			continue
		}
		faults++
	}
	checkHealed(t, c, rec, path, faults)
}

// checkHealed checks the history of a nemesis run: one healing per fault,
// none failed, and a cluster whose every node runs and that takes a send.
func checkHealed(t *testing.T, c *procs.Cluster, rec *history.Recorder, path string, faults int) {
	t.Helper()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var injected, healed int
	for _, op := range ops {
		if op.Kind != history.Fault {
			t.Fatalf("nemesis recorded a %s op", op.Kind)
		}
		if op.Outcome != history.OK {
			t.Errorf("fault %q: %s", op.Fault, op.Error)
		}
		if op.Heal {
			healed++
		} else {
			injected++
		}
	}
	if injected != faults || healed != faults {
		t.Fatalf("history has %d faults and %d healings, want %d of each: %v", injected, healed, faults, ops)
	}
	for i := range c.Nodes {
		if !c.Running(i) {
			t.Fatalf("%s left stopped", c.Nodes[i].ID)
		}
		c.Resume(i) // harmless when running; a stopped-but-alive node would hang WaitReady
		c.WaitReady(i, 30*time.Second)
	}
	msg := raftbusv1.NewMessagingServiceClient(c.Conn(1))
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: nemesisQueue, Messages: []*raftbusv1.Message{{MessageId: "after", Body: []byte("x")}}})
		return err
	})
}
