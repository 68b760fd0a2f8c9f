package partition

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
)

// A partition nobody uses should cost nothing: no heartbeats, no timers,
// no goroutines. hashicorp/raft has no idle mode, so an idle group is
// closed on every replica and opened again when it is needed; its state
// stays on disk (the node log and a snapshot), and raft, built to survive
// a crash and restart of every member, needs nothing more.
//
// The replicas agree to close through the log: the leader, finding the
// partition idle (quiesceReady), proposes an entry marked quiesce. A
// replica whose newest entry is that marker, applied, closes (Quiet); the
// leader waits a little longer, so that its followers hear the marker is
// committed before it goes quiet, instead of waiting for heartbeats that no
// longer come and electing. Any later entry (a request that came after the
// marker) keeps every replica open. Whoever needs the group again (a
// request on one node, a raft RPC from a peer) opens it; the node that
// opens it for a request stands for election at once (Config.Elect).
//
// A partition with work due soon (a lock to expire, a message to activate
// or expire, a window to prune) does not quiesce. Work due later does not
// keep it open: the leader that quiesced it tells its node when (Due),
// and the node opens it again then. Were that node lost meanwhile, the
// work waits for the next request, which applies what time has made due
// before anything else, as every command does.

// quiesceMaxMessages bounds the messages a quiescing partition may hold:
// opening one again restores its index from a snapshot, which for a large
// backlog takes longer than a request should wait.
const quiesceMaxMessages = 10_000

// quiesceFollowerWindow is how recently every follower must have answered
// the leader, caught up, for the partition to quiesce: a follower that is
// down or behind would miss the marker, and elect once its leader is gone.
const quiesceFollowerWindow = 2 * time.Second

// errNotIdle is why Quiesce proposed nothing.
var errNotIdle = errors.New("partition is not idle")

// activity records when a replica was last used for a request and how many
// requests use it now.
type activity struct {
	last atomic.Int64 // Unix ns
	busy atomic.Int64
}

// begin marks a request as using the replica; the returned func ends it.
func (a *activity) begin() func() {
	a.busy.Add(1)
	a.last.Store(time.Now().UnixNano())
	return func() {
		a.last.Store(time.Now().UnixNano())
		a.busy.Add(-1)
	}
}

// idleFor reports whether no request has used the replica for d.
func (a *activity) idleFor(d time.Duration) bool {
	return a.busy.Load() == 0 && time.Since(time.Unix(0, a.last.Load())) >= d
}

// IdleFor reports whether no request has used the replica for d (nor
// since it opened).
func (p *Partition) IdleFor(d time.Duration) bool { return p.activity.idleFor(d) }

// Quiesce proposes the quiesce marker when this replica leads, has served
// no request for idle, and the partition has nothing to do on its own: no
// work due, nothing in flight, every follower caught up. It returns
// errNotIdle-wrapped errors when it proposed nothing, and the marker's
// outcome otherwise; once the marker is applied, Quiet reports the
// replica may close.
func (p *Partition) Quiesce(ctx context.Context, idle time.Duration) error {
	due, err := p.quiesceReady(idle)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotIdle, err)
	}
	p.quiesceDue.Store(due)
	data, err := proto.Marshal(&enginev1.Entry{Quiesce: true})
	if err != nil {
		return err
	}
	f, err := awaitStarted(ctx, p.stop, func() raft.Future { return p.raft.Apply(data, p.cfg.ApplyTimeout) })
	if err != nil {
		return fmt.Errorf("partition %s: quiesce: %w", p.name, err)
	}
	index := f.(raft.IndexFuture).Index()
	if err := p.fsm.readAt(ctx, p.stop, index, func(*engine.Engine) {}); err != nil {
		return fmt.Errorf("partition %s: quiesce: %w", p.name, err)
	}
	p.quiescedAt.Store(time.Now().UnixNano())
	return nil
}

// IsQuiesceSkipped reports whether err says Quiesce proposed nothing
// because the partition is not idle.
func IsQuiesceSkipped(err error) bool { return errors.Is(err, errNotIdle) }

// quiesceReady says why the partition may not quiesce now, or returns
// when its next work is due (Unix ms, 0: none).
func (p *Partition) quiesceReady(idle time.Duration) (int64, error) {
	term := p.raft.CurrentTerm()
	switch {
	case p.raft.State() != raft.Leader || p.readyTerm.Load() != term:
		return 0, errors.New("not a ready leader")
	case !p.activity.idleFor(idle):
		return 0, errors.New("used recently")
	case len(p.proposals) > 0 || len(p.slots) > 0 || p.handingOver.Load():
		return 0, errors.New("entries on their way")
	}
	last := p.raft.LastIndex()
	if applied := p.fsm.appliedIndex(); applied != last {
		return 0, fmt.Errorf("applied %d of %d entries", applied, last)
	}
	if p.fsm.quiesceAt.Load() == last {
		return 0, errors.New("already quiesced")
	}
	now, err := p.Now()
	if err != nil {
		return 0, err
	}
	var due, messages int64
	var hasDue bool
	p.fsm.read(func(e *engine.Engine) {
		due, hasDue = e.NextDeadline()
		e.EachCounters(func(path string, _ engine.Counters) {
			if rt, err := e.RuntimeProperties(path); err == nil {
				messages += rt.GetActiveMessageCount() + rt.GetDeferredMessageCount() + rt.GetDeadLetterMessageCount() +
					rt.GetScheduledMessageCount() + rt.GetTransferMessageCount()
			}
		})
	})
	if !hasDue {
		due = 0
	} else if due-now < idle.Milliseconds() {
		return 0, fmt.Errorf("work due in %d ms", due-now)
	}
	if messages > quiesceMaxMessages {
		return 0, fmt.Errorf("holds %d messages", messages)
	}
	cf := p.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return 0, err
	}
	_, self := p.raft.LeaderWithID()
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			return 0, fmt.Errorf("%s is not a voter", s.ID)
		}
		if s.ID == self {
			continue
		}
		seen, err := p.followers.ready(s.ID, term, last, quiesceFollowerWindow)
		if err != nil {
			return 0, err
		}
		if seen < last {
			return 0, fmt.Errorf("%s is %d entries behind", s.ID, last-seen)
		}
	}
	return due, nil
}

// Due is when the work of the partition this replica quiesced as leader
// is due (Unix ms by the leader's clock, 0: none): its node opens it again
// then.
func (p *Partition) Due() int64 { return p.quiesceDue.Load() }

// Quiet reports whether the replica may close now that its partition has
// quiesced: its newest entry is the quiesce marker, applied; a leader
// waits linger after the marker's commit first.
func (p *Partition) Quiet(linger time.Duration) bool {
	at := p.fsm.quiesceAt.Load()
	if at == 0 || p.raft.LastIndex() != at || p.fsm.appliedIndex() != at {
		return false
	}
	if p.raft.State() == raft.Leader {
		q := p.quiescedAt.Load()
		return q != 0 && time.Since(time.Unix(0, q)) >= linger
	}
	return true
}

// QuiesceIndex is the log index of the quiesce marker this replica last
// applied (0: none).
func (p *Partition) QuiesceIndex() uint64 { return p.fsm.quiesceAt.Load() }

// Snapshot takes a snapshot of the replica now, so that the replica opens
// again from it without replaying its log. Nothing new to snapshot is not
// an error.
func (p *Partition) Snapshot(ctx context.Context) error {
	err := Await(ctx, p.stop, p.raft.Snapshot())
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("partition %s: snapshot: %w", p.name, err)
	}
	return nil
}

// AwaitServing waits until the partition has a leader: nil when it is this
// replica, ready to serve, else the NOT_LEADER error naming the leader.
// It gives up when ctx ends. A group opened again after quiescing has no
// leader for the few milliseconds of its election.
func (p *Partition) AwaitServing(ctx context.Context) error {
	const poll = 2 * time.Millisecond
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if p.raft.State() == raft.Leader {
			if p.readyTerm.Load() == p.raft.CurrentTerm() {
				return nil
			}
		} else if addr, _ := p.leader(); addr != "" {
			return p.notLeader()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return p.notLeader()
		case <-p.stop:
			return p.closing()
		}
	}
}
