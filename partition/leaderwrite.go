package partition

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// A leader writes its entries to its own log while it replicates them,
// not before (the Raft thesis, 10.2.1): a commit then waits for the
// slower of the leader's sync and a follower's, not for both in series.
//
// hashicorp/raft stores an entry in the leader's log (dispatchLogs) before
// it lets replication start, and counts the leader's copy towards the
// majority as soon as that store returns. So the leader's store returns
// once the node log has the entries queued (leaderLog), and what would
// otherwise rest on the leader's copy being durable is held back until it
// is:
//
//   - the leader applies an entry, and so answers its callers, only once
//     its own copy is durable (fsm.durable): every answer rests on a
//     majority of durable copies, the leader's and those of the followers
//     raft counted with it;
//   - the commit index the leader sends its followers never passes its
//     own durable entries (commitCap): a follower applies an entry only
//     once two copies are durable, so no replica applies an entry that a
//     crash of the leader could take back (a leader that loses its unsynced
//     entries in a power cut may otherwise have counted them towards a
//     majority it no longer has, and a new leader could overwrite them).
//
// Only commands go this way. A batch with anything else (the leader's
// first no-op, a configuration change, a barrier) is stored durably before
// raft counts it, as before, and so waits for every queued entry before
// it: Raft's own decisions never rest on an unsynced copy.

// queuingLog is a log store that can take a leader's entries without
// waiting for them (raftlog.Group).
type queuingLog interface {
	raft.LogStore
	// IsMonotonic is part of the interface so that leaderLog has it too:
	// raft empties a monotonic store after installing a snapshot, and
	// only compacts another, keeping entries the next appends would not
	// follow.
	raft.MonotonicLogStore
	// StoreLogsQueued returns once the entries are queued for writing,
	// in order with the group's other requests.
	StoreLogsQueued(logs []*raft.Log) error
	// WaitDurable waits until the entries through index are durable.
	WaitDurable(index uint64) error
}

// leaderLog is the log store of a replica's raft: appends of commands
// while the replica leads are queued, everything else is stored durably.
type leaderLog struct {
	queuingLog
	// raft is the replica's raft, once running. Raft stores entries from
	// its own goroutine, which is also the one that changes its state,
	// so its state during a store is that of the caller: Leader in
	// dispatchLogs, never in a follower's AppendEntries (raft makes itself
	// a follower before it stores a leader's entries).
	raft *atomic.Pointer[raft.Raft]
	// stored hears of every store, for the AppendEntries held back while
	// they have nothing to tell (idleappend.go).
	stored *storeSignal
}

func (s leaderLog) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s leaderLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) > 0 {
		// Once stored, before raft triggers the replication of the
		// entries: an AppendEntries held back goes, and raft's next one
		// carries them.
		defer s.stored.notify(logs[len(logs)-1].Index)
	}
	r := s.raft.Load()
	if r == nil || r.State() != raft.Leader {
		return s.queuingLog.StoreLogs(logs)
	}
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			return s.queuingLog.StoreLogs(logs)
		}
	}
	return s.queuingLog.StoreLogsQueued(logs)
}

// commitCap is the transport of a replica whose leader writes while it
// replicates: every AppendEntries carries a commit index no higher than
// the last entry of the leader's log that is durable.
type commitCap struct {
	transportWrapper
	durable func() (uint64, error) // the log's LastIndex: durable entries only
	idle    idleHold
}

// capCommits wraps t; ok is false for a transport without pre-vote, which
// is left as it is.
func capCommits(t raft.Transport, logs raft.LogStore, idle idleHold) (raft.Transport, bool) {
	w, ok := wrapTransport(t)
	if !ok {
		return t, false
	}
	return &commitCap{transportWrapper: w, durable: logs.LastIndex, idle: idle}, true
}

// capped returns args with its commit index lowered to the last durable
// entry, as a copy: raft keeps args.
func (c *commitCap) capped(args *raft.AppendEntriesRequest) (*raft.AppendEntriesRequest, error) {
	if args.LeaderCommitIndex == 0 {
		return args, nil
	}
	last, err := c.durable()
	if err != nil {
		return nil, fmt.Errorf("read the last durable entry: %w", err)
	}
	if args.LeaderCommitIndex <= last {
		return args, nil
	}
	out := *args
	out.LeaderCommitIndex = last
	return &out, nil
}

func (c *commitCap) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	req, err := c.capped(args)
	if err != nil {
		return err
	}
	return c.Transport.AppendEntries(id, target, req, resp)
}

func (c *commitCap) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := c.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &cappedPipeline{AppendPipeline: p, c: c}, nil
}

// cappedPipeline is a pipeline of AppendEntries to one follower with
// capped commit indexes, which holds back those with nothing to tell.
// Raft calls it from one goroutine.
type cappedPipeline struct {
	raft.AppendPipeline
	c    *commitCap
	told told
}

func (p *cappedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	req, err := p.c.capped(args)
	if err != nil {
		return nil, err
	}
	if p.told.nothingNewIn(req) {
		if req, err = p.c.idle.wait(req, p.told, p.c.durable); err != nil {
			return nil, err
		}
	}
	f, err := p.AppendPipeline.AppendEntries(req, resp)
	if err == nil {
		p.told.sent(req)
	}
	return f, err
}
