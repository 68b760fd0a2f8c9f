package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Leadership transfers in hashicorp/raft hold every proposal of the leader
// (ErrLeadershipTransferInProgress) until the goroutine that runs the
// transfer returns, and that goroutine first hands a request to the
// target's replication goroutine over a channel of one. When that
// replication is busy (a follower that is down, or catching up entry by
// entry or by snapshot), the transfer times out and leaves its request in
// the channel; a second transfer then blocks on the full channel for as
// long as the replication stays busy, and forever if leadership moves
// meanwhile and the replication ends: the flag is never cleared, and the
// replica refuses every proposal when it leads again. So a transfer is
// only started to a follower that answers and is caught up (HandOver), and
// a leader whose proposals have been refused for a transfer for far longer
// than a transfer takes says so (TransferStuckFor), for its node to
// restart it.

// maxHandOverLag is how many entries a follower's log may be short of the
// leader's for a transfer to it: about what raft sends in one append, so
// that the transfer's catch-up is one round trip.
const maxHandOverLag = 256

// ErrNoSuccessor is returned by HandOver when no voter is in a state to
// take leadership over now.
var ErrNoSuccessor = errors.New("no follower is ready to take leadership over")

// ErrSoleVoter is returned by HandOver when the group has no voter but
// this one (a single-node cluster): there is no one to hand over to, now
// or later.
var ErrSoleVoter = errors.New("the group has no other voter")

// Followers is what a leader learns of its followers from their answers to
// AppendEntries, heartbeats included (raft sends those every tenth of the
// heartbeat timeout, whatever else is going on): when each last answered in
// the leader's term, and how far its log reached then. Raft keeps its own
// view private.
type Followers struct {
	mu   sync.Mutex
	seen map[raft.ServerID]followerSeen
}

type followerSeen struct {
	at      time.Time
	term    uint64
	lastLog uint64
}

// NewFollowers returns an empty view; StartGroup fills it when given one.
func NewFollowers() *Followers {
	return &Followers{seen: make(map[raft.ServerID]followerSeen)}
}

func (f *Followers) answered(id raft.ServerID, term, lastLog uint64) {
	f.mu.Lock()
	f.seen[id] = followerSeen{at: time.Now(), term: term, lastLog: lastLog}
	f.mu.Unlock()
}

// ready says why id cannot take leadership over from a leader in term
// whose log ends at last, or nil when it can: it answered in this term
// within window, and lags at most maxHandOverLag entries.
func (f *Followers) ready(id raft.ServerID, term, last uint64, window time.Duration) (uint64, error) {
	f.mu.Lock()
	s, ok := f.seen[id]
	f.mu.Unlock()
	switch {
	case !ok || s.term != term:
		return 0, fmt.Errorf("%s has not answered in this term", id)
	case time.Since(s.at) > window:
		return 0, fmt.Errorf("%s last answered %s ago", id, time.Since(s.at).Round(time.Millisecond))
	case s.lastLog+maxHandOverLag < last:
		return 0, fmt.Errorf("%s is %d entries behind", id, last-s.lastLog)
	}
	return s.lastLog, nil
}

// watchedTransport records the followers' answers to AppendEntries.
type watchedTransport struct {
	transportWrapper
	followers *Followers
}

// watch wraps t to fill f; a transport without pre-vote is left as it is.
func watch(t raft.Transport, f *Followers) raft.Transport {
	w, ok := wrapTransport(t)
	if f == nil || !ok {
		return t
	}
	return &watchedTransport{transportWrapper: w, followers: f}
}

func (w *watchedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := w.Transport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Term == args.Term {
		w.followers.answered(id, args.Term, resp.LastLog)
	}
	return err
}

// HandOver transfers leadership of a group r leads to the voter to, or,
// when to is empty, to the most up-to-date voter, and waits for raft's
// answer. It refuses with ErrNoSuccessor, starting nothing, when the
// target (or every voter) has not answered within window or lags (see the
// top of this file for why).
func HandOver(ctx context.Context, r *raft.Raft, f *Followers, to raft.ServerID, window time.Duration) error {
	target, err := successor(r, f, to, window)
	if err != nil {
		return err
	}
	return Await(ctx, nil, r.LeadershipTransferToServer(target.ID, target.Address))
}

// successor picks the voter HandOver transfers to.
func successor(r *raft.Raft, f *Followers, to raft.ServerID, window time.Duration) (raft.Server, error) {
	if r.State() != raft.Leader {
		return raft.Server{}, raft.ErrNotLeader
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return raft.Server{}, fmt.Errorf("read configuration: %w", err)
	}
	term, last := r.CurrentTerm(), r.LastIndex()
	_, self := r.LeaderWithID()
	var target *raft.Server
	var best uint64
	var why []error
	others := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage != raft.Voter || s.ID == self {
			continue
		}
		others++
		if to != "" && s.ID != to {
			continue
		}
		lastLog, err := f.ready(s.ID, term, last, window)
		if err != nil {
			why = append(why, err)
			continue
		}
		if target == nil || lastLog > best {
			target, best = &s, lastLog
		}
	}
	if target == nil {
		if others == 0 {
			return raft.Server{}, ErrSoleVoter
		}
		if to != "" && len(why) == 0 {
			return raft.Server{}, fmt.Errorf("%w: %s is not a voter of the group", ErrNoSuccessor, to)
		}
		return raft.Server{}, fmt.Errorf("%w: %w", ErrNoSuccessor, errors.Join(why...))
	}
	return *target, nil
}

// HandOver transfers the leadership of the partition to the voter to, or,
// when to is empty, to the most up-to-date one. It returns ErrNoSuccessor,
// and leaves leadership here, when the target is out of touch or behind.
// Before the transfer it stops proposing (callers get a SERVER_BUSY that
// says nothing was applied, and retry at the next leader) and waits for
// the entries on their way to be answered: an entry still on its way when
// leadership moves commits, or not, under the next leader, and its callers
// could only be told that the outcome is unknown.
func (p *Partition) HandOver(ctx context.Context, to string) error {
	err := p.handOver(ctx, raft.ServerID(to))
	p.noteTransferRefusal(err)
	if err != nil {
		return fmt.Errorf("partition %s: hand over: %w", p.name, err)
	}
	return nil
}

func (p *Partition) handOver(ctx context.Context, to raft.ServerID) error {
	target, err := successor(p.raft, p.followers, to, p.cfg.ElectionTimeout)
	if err != nil {
		return err
	}
	p.handingOver.Store(true)
	defer p.handingOver.Store(false)
	if p.stored != nil {
		p.stored.poke() // no AppendEntries waits from now on
	}
	if err := p.awaitNoEntriesInFlight(ctx); err != nil {
		return err
	}
	return p.await(ctx, p.raft.LeadershipTransferToServer(target.ID, target.Address))
}

// inFlightPoll is how often awaitNoEntriesInFlight looks; entries are
// answered within a few fsyncs.
const inFlightPoll = time.Millisecond

// awaitNoEntriesInFlight waits until every entry the proposer handed to
// raft has been answered.
func (p *Partition) awaitNoEntriesInFlight(ctx context.Context) error {
	t := time.NewTicker(inFlightPoll)
	defer t.Stop()
	for len(p.slots) > 0 {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.stop:
			return raft.ErrRaftShutdown
		}
	}
	return nil
}

// transferStuck tracks how long raft has refused this leader's proposals
// for a leadership transfer: since the first refusal in term with no
// proposal taken after it.
type transferStuck struct {
	mu    sync.Mutex
	term  uint64
	since time.Time
}

// noteTransferRefusal records err when it is raft refusing for a transfer
// in progress, and clears the record when err is nil (raft took the
// proposal).
func (p *Partition) noteTransferRefusal(err error) {
	s := &p.stuck
	switch {
	case err == nil:
		s.mu.Lock()
		s.since = time.Time{}
		s.mu.Unlock()
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		term := p.raft.CurrentTerm()
		s.mu.Lock()
		if s.since.IsZero() || s.term != term {
			s.term, s.since = term, time.Now()
		}
		s.mu.Unlock()
	}
}

// TransferStuckFor is how long this replica, leading, has had its
// proposals refused for a leadership transfer in this term with none
// taken since; zero when it is not leading or raft takes proposals. A
// transfer takes about two election timeouts; far longer means raft's
// transfer will never end (see the top of this file), and the replica
// must be restarted.
func (p *Partition) TransferStuckFor() time.Duration {
	s := &p.stuck
	s.mu.Lock()
	term, since := s.term, s.since
	s.mu.Unlock()
	if since.IsZero() || p.raft.State() != raft.Leader || p.raft.CurrentTerm() != term {
		return 0
	}
	return time.Since(since)
}
