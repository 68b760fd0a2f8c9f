package partition

import (
	"time"

	"github.com/hashicorp/raft"
)

// WrapLogStore makes the replica opened with c write its Raft log through
// wrap.
func WrapLogStore(c *Config, wrap func(raft.LogStore) raft.LogStore) { c.wrapLogStore = wrap }

// QueuedProposals is how many proposals wait for the proposer.
func (p *Partition) QueuedProposals() int { return len(p.proposals) }

// FollowerReady says why the follower id could not take leadership over
// from this replica now, or nil when it could (see HandOver).
func (p *Partition) FollowerReady(id string) error {
	_, err := p.followers.ready(raft.ServerID(id), p.raft.CurrentTerm(), p.raft.LastIndex(), p.cfg.ElectionTimeout)
	return err
}

// Raft is the replica's Raft node, for tests that drive it directly.
func (p *Partition) Raft() *raft.Raft { return p.raft }

// StateAppliedIndex is the log index the replica's state machine has
// applied through. Raft's own AppliedIndex counts entries once they are
// handed to the state machine's queue, not once applied.
func (p *Partition) StateAppliedIndex() uint64 { return p.fsm.appliedIndex() }

// Riders is how many waiting receives ride on the next entry with a send.
func (p *Partition) Riders() int {
	p.riders.mu.Lock()
	defer p.riders.mu.Unlock()
	return len(p.riders.waiting)
}

// QuietForRiders sets how long the replica opened with c must have proposed
// nothing for waiting receives to ride on its next entry (negative: any
// time no entry is on its way).
func QuietForRiders(c *Config, d time.Duration) { c.quietForRiders = d }

// OnIdleHold has f called as an AppendEntries starts to wait for something
// to tell its follower.
func OnIdleHold(c *Config, f func(*raft.AppendEntriesRequest)) { c.onIdleHold = f }
