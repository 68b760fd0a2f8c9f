package partition

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// tokenSeedSize is the size of the random seed the leader puts in every
// command; the engine derives the command's lock tokens from it.
const tokenSeedSize = 16

type proposal struct {
	cmd *enginev1.Command
	// size is what the command adds to an entry (at most
	// MaxCommandBytes + commandFraming).
	size int
	done chan proposalResult // buffered: the responder never blocks
}

type proposalResult struct {
	res *enginev1.Result
	// bodies are the messages res hands out whose bodies the caller
	// reads from the log.
	bodies []engine.PendingBody
	err    error
}

// outcome is the result as Apply returns it: the engine's refusal of the
// command as an error.
// outcome is the result of a proposal as its caller gets it: with the
// bodies of the messages it hands out read from the log.
func (p *Partition) outcome(r proposalResult) (*enginev1.Result, error) {
	res, err := r.outcome()
	if err == nil && len(r.bodies) > 0 {
		if err := p.bodies.fill(r.bodies); err != nil {
			return nil, err
		}
	}
	return res, err
}

func (r proposalResult) outcome() (*enginev1.Result, error) {
	switch {
	case r.err != nil:
		return nil, r.err
	case r.res.GetError() != nil:
		return nil, newError(r.res.GetError().Reason, "%s", r.res.GetError().Message)
	}
	return r.res, nil
}

// inflightEntry is one log entry proposed to Raft and the callers whose
// commands it carries, in order.
type inflightEntry struct {
	future raft.ApplyFuture
	batch  []*proposal
	// proposed is when the entry was handed to Raft (zero without an
	// Observer, which alone needs it).
	proposed time.Time
}

// runProposer collects whatever proposals are waiting (up to
// MaxCommandsPerEntry, and MaxEntryBytes), stamps them with the leader's
// time and token seeds and proposes them as one log entry. While
// MaxEntriesInFlight entries are on their way it waits, and what arrives
// meanwhile goes into the next entry: under load many callers share one
// entry.
func (p *Partition) runProposer() {
	defer p.wg.Done()
	// pending holds commands taken from the queue but left for the next
	// entry (the rest of a group that did not fit).
	var pending []*proposal
	var lastProposed time.Time
	for {
		if len(pending) == 0 {
			select {
			case pending = <-p.proposals:
			case <-p.stop:
				return
			}
		}
		// quiet: no entry on its way, and none proposed for a while: only
		// then do waiting receives ride along (see riders.go).
		quiet := time.Since(lastProposed) >= p.cfg.quietForRiders
		select {
		case p.slots <- struct{}{}:
		default:
			quiet = false
			select {
			case p.slots <- struct{}{}:
			case <-p.stop:
				respondAll(pending, proposalResult{err: p.closing()})
				return
			}
		}
		var batch []*proposal
		batch, pending = p.collect(pending)
		if quiet {
			batch = p.riders.join(batch, p.cfg.MaxCommandsPerEntry)
		}
		lastProposed = time.Now()
		fail := func(err error) {
			<-p.slots
			respondAll(batch, proposalResult{err: err})
		}
		// Checked holding a slot: HandOver, once it sees no slot taken,
		// knows every later batch sees the flag.
		if p.handingOver.Load() {
			fail(p.proposalError(raft.ErrLeadershipTransferInProgress))
			continue
		}
		now, err := p.stampTime()
		if err != nil {
			fail(err)
			continue
		}
		entry, err := stamp(batch, now)
		if err != nil {
			fail(err)
			continue
		}
		data, err := proto.Marshal(entry)
		if err != nil {
			fail(newError(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "partition %s: encode command: %v", p.name, err))
			continue
		}
		var proposed time.Time
		if p.cfg.Observer != nil {
			proposed = time.Now()
		}
		select {
		case p.inflight <- inflightEntry{future: p.raft.Apply(data, p.cfg.ApplyTimeout), batch: batch, proposed: proposed}:
		case <-p.stop:
			// Raft is shut down; the entry was handed over (or failed)
			// with an unknown outcome.
			respondAll(batch, proposalResult{err: p.proposalError(raft.ErrRaftShutdown)})
			respondAll(pending, proposalResult{err: p.closing()})
			return
		}
	}
}

// collect makes the batch of one entry: the pending commands and those of
// the groups waiting after them, in order, as long as they fit in
// MaxEntryBytes and MaxCommandsPerEntry (the first always goes). It
// returns what it took that would not fit, to lead the next entry.
func (p *Partition) collect(pending []*proposal) (batch, rest []*proposal) {
	size := 0
	// take adds group to the batch until it is full, and returns what is
	// left of the group once it is.
	take := func(group []*proposal) []*proposal {
		for i, pr := range group {
			if len(batch) > 0 && (len(batch) == p.cfg.MaxCommandsPerEntry || size+pr.size > MaxEntryBytes) {
				return group[i:]
			}
			batch = append(batch, pr)
			size += pr.size
		}
		return nil
	}
	if rest = take(pending); rest != nil {
		return batch, rest
	}
	for {
		select {
		case group := <-p.proposals:
			if rest = take(group); rest != nil {
				return batch, rest
			}
		default:
			return batch, nil
		}
	}
}

// stampTime is the time of the next entry, in Unix milliseconds: the
// node's clock (bounded by what its monotonic clock has seen since peers
// last vouched for it), and never before the last time this replica
// stamped, so stamps do not go back when the wall clock does. Only the
// proposer calls it. While the node's clock is not trusted it fails with
// SERVER_BUSY and nothing is proposed.
func (p *Partition) stampTime() (int64, error) {
	ms, err := p.Now()
	if err != nil {
		return 0, err
	}
	p.lastStamp.Store(ms)
	return ms, nil
}

// Now is the time this replica stamps into a command proposed now, in
// Unix milliseconds, for decisions a leader makes on its own state (is a
// lock still held?). It fails with SERVER_BUSY while the node's clock is
// not trusted.
func (p *Partition) Now() (int64, error) {
	t, err := p.cfg.Clock.Now()
	if err != nil {
		return 0, newError(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY,
			"partition %s: %v; the operation was not applied", p.name, err)
	}
	return max(t.UnixMilli(), p.lastStamp.Load()), nil
}

// stamp fills in what only the leader may decide: the time, the lock token
// seeds and the engine version of each command. Followers apply the
// stamped values as they are.
func stamp(batch []*proposal, ms int64) (*enginev1.Entry, error) {
	seeds := make([]byte, tokenSeedSize*len(batch))
	if _, err := rand.Read(seeds); err != nil {
		return nil, fmt.Errorf("draw lock token seeds: %w", err)
	}
	entry := &enginev1.Entry{Commands: make([]*enginev1.Command, len(batch))}
	for i, pr := range batch {
		pr.cmd.NowUnixMs = ms
		pr.cmd.TokenSeed = seeds[i*tokenSeedSize : (i+1)*tokenSeedSize]
		pr.cmd.EngineVersion = engine.Version
		entry.Commands[i] = pr.cmd
	}
	return entry, nil
}

// runResponder waits for proposed entries in log order and hands each caller
// its command's result.
func (p *Partition) runResponder() {
	defer p.wg.Done()
	for {
		var in inflightEntry
		select {
		case in = <-p.inflight:
		case <-p.stop:
			return
		}
		// Not in.future.Error(): Raft may never answer it at shutdown.
		err := p.await(context.Background(), in.future)
		<-p.slots
		if err != nil {
			respondAll(in.batch, proposalResult{err: p.proposalError(err)})
			continue
		}
		p.noteTransferRefusal(nil)
		if p.cfg.Observer != nil {
			p.cfg.Observer.Committed(time.Since(in.proposed))
		}
		er, ok := in.future.Response().(entryResults)
		switch {
		case !ok:
			respondAll(in.batch, proposalResult{err: newError(raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
				"partition %s: log entry %d produced no result", p.name, in.future.Index())})
		case er.err != nil:
			respondAll(in.batch, proposalResult{err: er.err})
		case len(er.results) != len(in.batch):
			respondAll(in.batch, proposalResult{err: newError(raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
				"partition %s: log entry %d: %d results for %d commands", p.name, in.future.Index(), len(er.results), len(in.batch))})
		default:
			for i, pr := range in.batch {
				r := proposalResult{res: er.results[i]}
				if er.bodies != nil {
					r.bodies = er.bodies[i]
				}
				pr.done <- r
			}
		}
	}
}

// failPending answers every proposal still queued after the proposer and
// responder stopped, so no caller waits forever.
func (p *Partition) failPending() {
	for {
		select {
		case group := <-p.proposals:
			respondAll(group, proposalResult{err: p.closing()})
		case in := <-p.inflight:
			respondAll(in.batch, proposalResult{err: p.proposalError(raft.ErrRaftShutdown)})
		default:
			return
		}
	}
}

func respondAll(batch []*proposal, r proposalResult) {
	for _, pr := range batch {
		pr.done <- r
	}
}
