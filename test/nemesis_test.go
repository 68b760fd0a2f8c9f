package test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/history"
	"github.com/raftbus/raftbus/test/nemesis"
	"github.com/raftbus/raftbus/test/procs"
)

func TestNemesisHealsWhatItBreaks(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "q", PartitionCount: proto.Uint32(2)}})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n := &nemesis.Nemesis{Cluster: c, Entity: "q", Kinds: nemesis.ProcessKinds, Rand: rand.New(rand.NewPCG(1, 2)), History: rec, Log: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	faults, err := n.Run(ctx, 200*time.Millisecond, time.Second)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if faults < 2 {
		t.Fatalf("%d faults injected in 6s", faults)
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
		_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "q", Messages: []*raftbusv1.Message{{MessageId: "after", Body: []byte("x")}}})
		return err
	})
}
