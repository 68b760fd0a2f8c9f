package partition

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// fsm adapts the engine to raft.BatchingFSM. Raft calls ApplyBatch, Snapshot
// and Restore from its FSM goroutine; the partition's readers (peek, counts,
// deadlines) come from others, so every use of the engine holds mu.
type fsm struct {
	name string

	mu     sync.Mutex
	engine *engine.Engine

	// progress guards applied and changed. It is not mu, so that learning
	// how far the state has come never waits for the engine.
	progress sync.Mutex
	// applied is the log index the engine's state is current through: the
	// last entry of the last batch applied, or the index a restored
	// snapshot was taken at (see applyThrough for the entries Raft keeps
	// from the state machine). Raft's own AppliedIndex cannot serve: Raft
	// advances it when it hands entries to the state machine's goroutine,
	// before they are applied.
	applied uint64
	// changed is closed (and replaced) after every applied batch, so
	// long-polling receivers and the tick scheduler wake on new state.
	changed chan struct{}

	// quiesceAt is the index of the last quiesce marker applied (see
	// quiesce.go), 0 when none.
	quiesceAt atomic.Uint64

	// snapshots counts the snapshots taken, for metrics.
	snapshots atomic.Uint64
	// snapshotPin is the oldest log entry the newest snapshot on disk
	// refers to a body in (0: none), which the log must keep along with
	// those the state refers to (see pinnedLog).
	snapshotPin atomic.Uint64

	// durable, when set, waits until the replica's own log holds the
	// entries through an index durably: a leader writes its entries while
	// it replicates them (leaderwrite.go), and applies none before its copy
	// is on disk. halted is the error of a wait that failed (the node log
	// failed or closed): from then on the replica applies nothing and takes
	// no snapshot, for its state would lack entries raft counts as applied.
	// Both are raft's FSM goroutine's alone.
	durable func(index uint64) error
	halted  error
	// halt is closed when the replica halts, for the partition to make
	// raft step down (its next write to the failed log fails).
	halt chan struct{}
}

func newFSM(name string, partitionID, partitionCount uint32) *fsm {
	return &fsm{
		name:    name,
		engine:  engine.New(partitionID, partitionCount),
		changed: make(chan struct{}),
		halt:    make(chan struct{}),
	}
}

// entryResults is what ApplyBatch returns for one log entry: the engine's
// result for each command, in order, or an error for an entry that could not
// be decoded (which no leader of ours proposes).
type entryResults struct {
	results []*enginev1.Result
	// bodies are, by command, the messages its result hands out whose
	// bodies are still to be read from the log (nil when none).
	bodies [][]engine.PendingBody
	err    error
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if len(logs) == 0 {
		return out
	}
	if err := f.awaitDurable(logs[len(logs)-1].Index); err != nil {
		for i := range out {
			out[i] = entryResults{err: err}
		}
		return out
	}
	f.mu.Lock()
	for i, l := range logs {
		// Configuration entries come here too; they change no state.
		if l.Type == raft.LogCommand {
			out[i] = f.applyEntry(l)
		}
	}
	f.mu.Unlock()
	f.advance(logs[len(logs)-1].Index, false)
	return out
}

// awaitDurable waits until this replica's log holds the entries through
// index durably; on a leader they may still be on their way to disk.
func (f *fsm) awaitDurable(index uint64) error {
	if f.halted == nil && f.durable != nil {
		if err := f.durable(index); err != nil {
			f.halted = newError(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
				"partition %s: entry %d is committed but this replica cannot make its own copy durable, and applies nothing more until its node restarts: %v", f.name, index, err)
			close(f.halt)
		}
	}
	return f.halted
}

// advance records that the state is current through index (never
// lowering what is recorded unless restored) and wakes whoever waits for
// the state to change.
func (f *fsm) advance(index uint64, restored bool) {
	f.progress.Lock()
	defer f.progress.Unlock()
	if restored || index > f.applied {
		f.applied = index
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// applyThrough records that the state is current through index. Raft
// keeps no-op and barrier entries from the state machine, so when the
// newest entries are of those kinds, applied stays below them; the leader
// calls this when a barrier of its own completes (Raft answers a barrier
// only after the state machine applied every entry before it).
func (f *fsm) applyThrough(index uint64) { f.advance(index, false) }

// readAt runs fn with the engine locked once the state is current through
// index, giving up when ctx ends or stop is closed.
func (f *fsm) readAt(ctx context.Context, stop <-chan struct{}, index uint64, fn func(e *engine.Engine)) error {
	for {
		f.progress.Lock()
		applied, changed := f.applied, f.changed
		f.progress.Unlock()
		if applied >= index {
			f.read(fn)
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return raft.ErrRaftShutdown
		}
	}
}

// appliedIndex is the log index the state is current through.
func (f *fsm) appliedIndex() uint64 {
	f.progress.Lock()
	defer f.progress.Unlock()
	return f.applied
}

func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

func (f *fsm) applyEntry(l *raft.Log) entryResults {
	// Every replica decodes every entry it applies, and protobuf's
	// reflective decoder cost as much as applying the commands (14 % of
	// a node's CPU at one partition and 256 sends in flight): the
	// generated decoder does the same without reflection. Entries were
	// encoded by proto.Marshal, which refuses invalid UTF-8, and the log
	// checks every record's checksum, so the generated decoder's not
	// checking strings again loses nothing.
	var entry enginev1.Entry
	if err := entry.UnmarshalVT(l.Data); err != nil {
		// Every replica skips the same undecodable entry, so they stay in
		// agreement; the proposer gets the error.
		return entryResults{err: fmt.Errorf("partition %s: decode log entry %d: %w", f.name, l.Index, err)}
	}
	if entry.Quiesce {
		f.quiesceAt.Store(l.Index)
	}
	results := make([]*enginev1.Result, len(entry.Commands))
	refs := bodyRefs(l.Index, l.Data, &entry)
	var bodies [][]engine.PendingBody
	for i, cmd := range entry.Commands {
		var r []engine.BodyRef
		if refs != nil {
			r = refs[i]
		}
		results[i] = f.engine.ApplyStored(cmd, r)
		if p := f.engine.TakeBodies(); len(p) > 0 {
			if bodies == nil {
				bodies = make([][]engine.PendingBody, len(entry.Commands))
			}
			bodies[i] = p
		}
	}
	return entryResults{results: results, bodies: bodies}
}

// A snapshot is snapshotMagic, the log index its state is current through
// (8 bytes, big endian), then the engine's snapshot. Raft does not tell
// Restore the index of the snapshot it restores, so the snapshot carries
// it. An engine snapshot starts with the nonzero length of its first
// record, so one written before this prefix existed is told apart; it
// restores with its index unknown (zero, which only makes a read wait for
// the next applied entry).
var snapshotMagic = []byte("\x00raftbus partition\x00")

// Snapshot captures the engine while raft holds the FSM goroutine, so the
// image is of one point in the log; Persist encodes it alongside new
// applies. Encoding under the lock stalled every apply for as long as the
// whole state took to encode (a quarter of a second and more for 100,000
// queued 1 KiB messages).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if f.halted != nil {
		return nil, f.halted
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.progress.Lock()
	applied := f.applied
	f.progress.Unlock()
	f.snapshots.Add(1)
	return &fsmSnapshot{f: f, name: f.name, applied: applied, pin: f.engine.OldestBodyRef(), image: f.engine.Capture()}, nil
}

func (f *fsm) Restore(r io.ReadCloser) error {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var applied uint64
	if head, err := br.Peek(len(snapshotMagic)); err == nil && bytes.Equal(head, snapshotMagic) {
		var index [8]byte
		if _, err := br.Discard(len(snapshotMagic)); err != nil {
			return fmt.Errorf("partition %s: restore: %w", f.name, err)
		}
		if _, err := io.ReadFull(br, index[:]); err != nil {
			return fmt.Errorf("partition %s: restore: read snapshot index: %w", f.name, err)
		}
		applied = binary.BigEndian.Uint64(index[:])
	}
	f.mu.Lock()
	err := f.engine.Restore(br)
	pin := f.engine.OldestBodyRef()
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("partition %s: restore engine: %w", f.name, err)
	}
	f.snapshotPin.Store(pin)
	f.advance(applied, true)
	return nil
}

// read runs fn with the engine locked. fn must not keep references to
// engine state past its return.
func (f *fsm) read(fn func(e *engine.Engine)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.engine)
}

// oldestPinned is the oldest log entry the state or the newest snapshot
// refers to a body in (0: none).
func (f *fsm) oldestPinned() uint64 {
	f.mu.Lock()
	pin := f.engine.OldestBodyRef()
	f.mu.Unlock()
	if s := f.snapshotPin.Load(); s > 0 && (pin == 0 || s < pin) {
		pin = s
	}
	return pin
}

// changes returns a channel closed after the next applied batch.
func (f *fsm) changes() <-chan struct{} {
	f.progress.Lock()
	defer f.progress.Unlock()
	return f.changed
}

type fsmSnapshot struct {
	f       *fsm
	name    string
	applied uint64
	pin     uint64 // the image's oldest body reference
	image   *engine.Image
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	_, err := sink.Write(binary.BigEndian.AppendUint64(slices.Clip(snapshotMagic), s.applied))
	if err == nil {
		err = s.image.Encode(sink)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("partition %s: write snapshot: %w", s.name, err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	// Raft compacts its log after this returns; from now on the
	// entries this snapshot refers to are kept for it.
	s.f.snapshotPin.Store(s.pin)
	return nil
}

func (s *fsmSnapshot) Release() {}
