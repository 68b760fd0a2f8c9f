package partition

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
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

// EntityStats is what one entity (a queue, topic or subscription) holds
// in a replica, and what happened to its messages (see engine.Counters).
type EntityStats struct {
	Path     string
	Runtime  *raftbusv1.PartitionRuntimeProperties
	Counters engine.Counters
}

// EachEntity calls fn with the stats of every entity this replica holds,
// as of its last applied entry. fn runs with the state machine locked: it
// must be quick.
func (p *Partition) EachEntity(fn func(EntityStats)) {
	p.fsm.read(func(e *engine.Engine) {
		e.EachCounters(func(path string, c engine.Counters) {
			rt, err := e.RuntimeProperties(path)
			if err != nil {
				return
			}
			fn(EntityStats{Path: path, Runtime: rt, Counters: c})
		})
	})
}
