package partition

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A leader's AppendEntries that would tell a follower nothing new wait,
// up to Config.IdleAppendHold, until there is something to tell.
//
// hashicorp/raft sends each follower an AppendEntries every one to two
// CommitTimeouts (50 ms) whether or not anything happened, so that
// followers learn a commit index that advanced after the last entries
// went. On an idle partition every one of them repeats the last: the same
// term, the same previous entry, no entries, the same commit index. Each
// is a message and an answer through both nodes' transports and raft
// loops, about half of what an idle partition cost (64 idle partitions on
// three nodes took 0.91 of a core; with a CommitTimeout of a second, 0.44).
// A longer CommitTimeout would cut them too, but followers would learn a
// commit index that late, and raft would retry a follower it lost as late.
//
// So the pipeline remembers what it last told its follower (told), and
// one that would repeat it waits until the leader stores entries (raft
// sends them next), until the commit index it may tell passes what it
// told (the request goes with it), until the replica stops, or until the
// hold ends (the request goes as raft made it, so that a follower that
// lost its log is found out). Nothing waits while the replica hands its
// leadership over: raft then lets the transfer go on only as it sends the
// successor its AppendEntries. Heartbeats, which keep followers from
// starting elections and confirm leadership, are not touched. Neither is
// the request raft sends while it does not pipeline (after a failure, to a
// follower catching up): those carry news.
//
// The commit index a held request takes is never past the last entry the
// pipeline sent: up to it the follower's log is known to match the
// leader's (Raft's rule, commit index at most that of the last new entry).

// told is what a pipeline last sent its follower.
type told struct {
	any       bool
	term      uint64
	lastIndex uint64 // of the last entry the follower was sent, or the previous one
	commit    uint64
}

func (t *told) sent(req *raft.AppendEntriesRequest) {
	t.any, t.term, t.commit = true, req.Term, req.LeaderCommitIndex
	t.lastIndex = req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		t.lastIndex = req.Entries[n-1].Index
	}
}

// nothingNewIn reports whether req repeats what was told.
func (t *told) nothingNewIn(req *raft.AppendEntriesRequest) bool {
	return t.any && len(req.Entries) == 0 && req.Term == t.term &&
		req.PrevLogEntry == t.lastIndex && req.LeaderCommitIndex <= t.commit
}

// idleHold is what a held request waits on.
type idleHold struct {
	max     time.Duration
	stored  *storeSignal
	applied func() <-chan struct{} // closed after the next applied batch
	raft    *atomic.Pointer[raft.Raft]
	stop    <-chan struct{}
	// handingOver is set while the replica hands its leadership over:
	// raft then sends the successor AppendEntries until it has every
	// entry (it lets the transfer go on once one is sent), and none may
	// wait. HandOver pokes stored as it sets it.
	handingOver *atomic.Bool
	onHold      func(*raft.AppendEntriesRequest) // for tests
}

// wait holds req, which repeats t, and returns the request to send.
// durable is the last durable entry of the leader's log.
func (h idleHold) wait(req *raft.AppendEntriesRequest, t told, durable func() (uint64, error)) (*raft.AppendEntriesRequest, error) {
	r := h.raft.Load()
	if r == nil || h.handingOver.Load() {
		return req, nil
	}
	if h.onHold != nil {
		h.onHold(req)
	}
	timer := time.NewTimer(h.max)
	defer timer.Stop()
	for {
		// The channels first, then the state they signal changes of.
		last, stored := h.stored.watch()
		applied := h.applied()
		if last > t.lastIndex || h.handingOver.Load() {
			return req, nil
		}
		commit, err := durable()
		if err != nil {
			return nil, err
		}
		commit = min(commit, r.CommitIndex(), t.lastIndex)
		if commit > t.commit {
			out := *req
			out.LeaderCommitIndex = commit
			return &out, nil
		}
		select {
		case <-stored:
		case <-applied:
		case <-h.stop:
			return req, nil
		case <-timer.C:
			return req, nil
		}
	}
}

// storeSignal tells of a log's stores: the last index of the latest, and
// a channel closed at the next (or when poked).
type storeSignal struct {
	mu   sync.Mutex
	last uint64
	next chan struct{}
}

func newStoreSignal() *storeSignal { return &storeSignal{next: make(chan struct{})} }

func (s *storeSignal) notify(last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = last
	s.wakeLocked()
}

// poke wakes the watchers without a store.
func (s *storeSignal) poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeLocked()
}

func (s *storeSignal) wakeLocked() {
	close(s.next)
	s.next = make(chan struct{})
}

func (s *storeSignal) watch() (last uint64, next <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.next
}
