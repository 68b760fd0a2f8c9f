package partition

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// bufferSink is a raft.SnapshotSink into memory.
type bufferSink struct{ bytes.Buffer }

func (s *bufferSink) ID() string    { return "test" }
func (s *bufferSink) Cancel() error { return nil }
func (s *bufferSink) Close() error  { return nil }

func commandLog(t *testing.T, index uint64, cmds ...*enginev1.Command) *raft.Log {
	t.Helper()
	data, err := proto.Marshal(&enginev1.Entry{Commands: cmds})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// TestStateMachineKnowsTheIndexItAppliedThroughSnapshots checks the index
// the state machine keeps: the last entry of each batch it applied, and
// after a restore the index its snapshot was taken at.
func TestStateMachineKnowsTheIndexItAppliedThroughSnapshots(t *testing.T) {
	f := newFSM("orders/0", 0, 1)
	f.ApplyBatch([]*raft.Log{
		commandLog(t, 5, &enginev1.Command{NowUnixMs: 1, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
			EntityPath: "orders", Properties: &raftbusv1.QueueProperties{Name: "orders"},
		}}}),
		commandLog(t, 6, &enginev1.Command{NowUnixMs: 2, Body: &enginev1.Command_Send{Send: &enginev1.Send{
			EntityPath: "orders", Messages: []*raftbusv1.Message{{Body: []byte("x")}},
		}}}),
		{Index: 7, Type: raft.LogConfiguration},
	})
	if got := f.applied; got != 7 {
		t.Fatalf("applied through %d after entries up to 7", got)
	}
	f.applyThrough(9) // a barrier at 9, which raft keeps from the state machine
	f.applyThrough(8)
	if got := f.applied; got != 9 {
		t.Fatalf("applied through %d after a barrier at 9", got)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Raft persists a snapshot while the state machine applies on: what
	// is persisted is the state at the snapshot.
	atSnapshot := f.engine.Digest()
	f.ApplyBatch([]*raft.Log{commandLog(t, 10, &enginev1.Command{NowUnixMs: 3, Body: &enginev1.Command_Send{Send: &enginev1.Send{
		EntityPath: "orders", Messages: []*raftbusv1.Message{{Body: []byte("after the snapshot")}},
	}}})})
	if f.engine.Digest() == atSnapshot {
		t.Fatal("an entry applied after the snapshot changed nothing")
	}
	var sink bufferSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := newFSM("orders/0", 0, 1)
	if err := g.Restore(readCloser(sink.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if g.applied != 9 || g.engine.Digest() != atSnapshot {
		t.Fatalf("restored through %d (want 9), the state at the snapshot %v", g.applied, g.engine.Digest() == atSnapshot)
	}

	// A snapshot of the engine alone, as written before snapshots carried
	// their index, restores with the index unknown.
	var legacy bytes.Buffer
	if err := f.engine.Snapshot(&legacy); err != nil {
		t.Fatal(err)
	}
	if err := g.Restore(readCloser(legacy.Bytes())); err != nil {
		t.Fatalf("restore a snapshot without index: %v", err)
	}
	if g.applied != 0 || g.engine.Digest() != f.engine.Digest() {
		t.Fatalf("restored without index: through %d (want 0), same state %v", g.applied, g.engine.Digest() == f.engine.Digest())
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func readCloser(b []byte) nopCloser { return nopCloser{bytes.NewReader(b)} }
