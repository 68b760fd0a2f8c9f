package partition

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
)

// Observer is told how long a replica's Raft work takes, for metrics. It
// is called on the replica's own goroutines and must not block. None of
// its calls is part of applying an entry: the state machine stays as
// deterministic as without it.
type Observer interface {
	// Committed: an entry this replica proposed as leader was committed
	// on a quorum and applied here, d after it was handed to Raft.
	Committed(d time.Duration)
	// Applied: a batch of entries went through the state machine in d.
	Applied(entries int, d time.Duration)
}

// timedFSM times the batches the state machine applies. The clock is read
// around the state machine, never inside it.
type timedFSM struct {
	*fsm
	observer Observer
}

func (t timedFSM) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	out := t.fsm.ApplyBatch(logs)
	t.observer.Applied(len(logs), time.Since(start))
	return out
}

func (t timedFSM) Apply(l *raft.Log) any { return t.ApplyBatch([]*raft.Log{l})[0] }

// RaftStats is what a replica's Raft group looks like from here.
type RaftStats struct {
	Leader       bool
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	// LastContact is when this replica last heard from its leader; zero
	// while it leads or before it ever heard from one.
	LastContact time.Time
	// Snapshots counts the snapshots this replica took since it opened.
	Snapshots uint64
}

// RaftStats returns the replica's Raft state.
func (p *Partition) RaftStats() RaftStats {
	return RaftStats{
		Leader:       p.raft.State() == raft.Leader,
		Term:         p.raft.CurrentTerm(),
		CommitIndex:  p.raft.CommitIndex(),
		AppliedIndex: p.fsm.appliedIndex(),
		LastContact:  p.raft.LastContact(),
		Snapshots:    p.fsm.snapshots.Load(),
	}
}

// EachCounters calls fn with the counters of every entity this replica
// holds (see engine.Counters), as of its last applied entry.
func (p *Partition) EachCounters(fn func(path string, c engine.Counters)) {
	p.fsm.read(func(e *engine.Engine) { e.EachCounters(fn) })
}
