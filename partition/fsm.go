package partition

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
)

// fsm adapts the engine to raft.BatchingFSM. Raft calls ApplyBatch, Snapshot
// and Restore from its FSM goroutine; the partition's readers (peek, counts,
// deadlines) come from others, so every use of the engine holds mu.
type fsm struct {
	name string

	mu     sync.Mutex
	engine *engine.Engine
	// changed is closed (and replaced) after every applied batch, so
	// long-polling receivers and the tick scheduler wake on new state.
	changed chan struct{}
}

func newFSM(name string, partitionID, partitionCount uint32) *fsm {
	return &fsm{
		name:    name,
		engine:  engine.New(partitionID, partitionCount),
		changed: make(chan struct{}),
	}
}

// entryResults is what ApplyBatch returns for one log entry: the engine's
// result for each command, in order, or an error for an entry that could not
// be decoded (which no leader of ours proposes).
type entryResults struct {
	results []*enginev1.Result
	err     error
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		out[i] = f.applyEntry(l)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return out
}

func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

func (f *fsm) applyEntry(l *raft.Log) entryResults {
	var entry enginev1.Entry
	if err := proto.Unmarshal(l.Data, &entry); err != nil {
		// Every replica skips the same undecodable entry, so they stay in
		// agreement; the proposer gets the error.
		return entryResults{err: fmt.Errorf("partition %s: decode log entry %d: %w", f.name, l.Index, err)}
	}
	results := make([]*enginev1.Result, len(entry.Commands))
	for i, cmd := range entry.Commands {
		results[i] = f.engine.Apply(cmd)
	}
	return entryResults{results: results}
}

// Snapshot serialises the engine while raft holds the FSM goroutine, so the
// image is of one point in the log; Persist then only copies bytes and can
// run alongside new applies.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var buf bytes.Buffer
	if err := f.engine.Snapshot(&buf); err != nil {
		return nil, fmt.Errorf("partition %s: snapshot engine: %w", f.name, err)
	}
	return &fsmSnapshot{data: buf.Bytes()}, nil
}

func (f *fsm) Restore(r io.ReadCloser) error {
	defer r.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.engine.Restore(r); err != nil {
		return fmt.Errorf("partition %s: restore engine: %w", f.name, err)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return nil
}

// read runs fn with the engine locked. fn must not keep references to
// engine state past its return.
func (f *fsm) read(fn func(e *engine.Engine)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.engine)
}

// changes returns a channel closed after the next applied batch.
func (f *fsm) changes() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

type fsmSnapshot struct{ data []byte }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
