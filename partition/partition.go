package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Partition is one replica of a partition: a Raft group member whose state
// machine is an engine. Operations are served only while this replica leads.
type Partition struct {
	name string
	cfg  Config

	raft *raft.Raft
	// running is raft once it runs, for its log store (leaderLog), which
	// raft calls from its own goroutines.
	running atomic.Pointer[raft.Raft]

	fsm *fsm
	// bodies reads the bodies of the messages handed out from the log.
	bodies *bodyReader
	// followers is what this replica, leading, sees of its followers;
	// stuck how long raft has refused its proposals for a transfer (see
	// handover.go).
	followers *Followers
	stuck     transferStuck
	// handingOver is set while HandOver waits for the entries on their
	// way: the proposer proposes nothing meanwhile.
	handingOver atomic.Bool
	// stored hears of the leader's stores; AppendEntries held back while
	// they have nothing to tell wait on it (idleappend.go). Nil when the
	// log cannot queue a leader's entries.
	stored *storeSignal

	// proposals feeds the proposer the commands of each call (Apply,
	// ApplyAll) as one group, so that an idle proposer, woken by a call,
	// finds all of its commands at once; inflight carries proposed
	// entries, in log order, to the responder.
	proposals chan []*proposal
	inflight  chan inflightEntry
	// slots holds a token for each entry proposed and not yet applied
	// (see Config.MaxEntriesInFlight).
	slots chan struct{}
	// riders are the Lock commands of receives waiting for a message,
	// which the proposer adds to the next entry that carries a send (see
	// riders.go).
	riders riders

	// readyTerm is the term in which this replica, as leader, has applied
	// every entry committed before its election; reads are served only then.
	readyTerm atomic.Uint64
	// lastStamp is the time (Unix ms) of the last entry this replica
	// proposed: stamps never go below it.
	lastStamp atomic.Int64
	// activity is when requests last used the replica (see quiesce.go);
	// quiescedAt when, leading, it saw its quiesce marker applied (Unix ns).
	// quiesceDue when its next work is due then (see Due).
	activity   activity
	quiescedAt atomic.Int64
	quiesceDue atomic.Int64

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// Open starts a replica from its stored state (creating it when empty):
// its log and stable store in cfg, its snapshots in cfg.Dir. Stored state
// that fails its checks (a snapshot that does not match its checksum, a
// log that does not join its snapshot, a log without its term) makes Open
// fail with an error that wraps ErrDamaged: such a replica must be rebuilt
// from its peers, not started.
func Open(cfg Config) (*Partition, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Partition{
		name:      cfg.Name,
		cfg:       cfg,
		fsm:       newFSM(cfg.Name, cfg.PartitionID, cfg.PartitionCount),
		proposals: make(chan []*proposal, 4*cfg.MaxCommandsPerEntry),
		inflight:  make(chan inflightEntry, cfg.MaxEntriesInFlight),
		slots:     make(chan struct{}, cfg.MaxEntriesInFlight),
		stop:      make(chan struct{}),
		followers: NewFollowers(),
	}
	p.activity.last.Store(time.Now().UnixNano())
	// Raft reads back what it just appended to replicate and apply it;
	// the cache answers those reads from memory.
	var logs raft.LogStore = cfg.Log
	if cfg.wrapLogStore != nil {
		logs = cfg.wrapLogStore(logs)
	}
	transport := cfg.Transport
	if q, ok := logs.(queuingLog); ok {
		p.stored = newStoreSignal()
		idle := idleHold{max: cfg.IdleAppendHold, stored: p.stored, applied: p.fsm.changes, raft: &p.running, stop: p.stop,
			handingOver: &p.handingOver, onHold: cfg.onIdleHold}
		if capped, ok := capCommits(transport, q, idle); ok {
			logs, transport = leaderLog{queuingLog: q, raft: &p.running, stored: p.stored}, capped
			p.fsm.durable = q.WaitDurable
		}
	}
	logs, err := raft.NewLogCache(logCacheSize, pinnedLog{LogStore: logs, oldest: p.fsm.oldestPinned})
	if err != nil {
		return nil, fmt.Errorf("partition %s: log cache: %w", cfg.Name, err)
	}
	p.bodies = newBodyReader(cfg.Name, logs)
	var machine raft.FSM = p.fsm
	if cfg.Observer != nil {
		machine = timedFSM{p.fsm, cfg.Observer}
	}
	p.raft, _, err = StartGroup(Group{
		Name: cfg.Name, NodeID: cfg.NodeID, Dir: cfg.Dir,
		Log: logs, Stable: cfg.Stable, Transport: transport, FSM: machine,
		Logger: cfg.Logger, OnDamage: cfg.OnDamage, Config: cfg.raftConfig(),
		Followers: p.followers,
		ExpandSnapshot: func(r io.Reader, w io.Writer) (int64, error) {
			return expandSnapshot(r, w, p.bodies.read)
		},
	})
	if err != nil {
		return nil, err
	}
	p.running.Store(p.raft)
	if len(cfg.Bootstrap) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ApplyTimeout)
		err := Await(ctx, nil, p.raft.BootstrapCluster(raft.Configuration{Servers: cfg.Bootstrap}))
		cancel()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			p.Close()
			return nil, fmt.Errorf("partition %s: bootstrap: %w", cfg.Name, err)
		}
		if e, ok := cfg.Transport.(electNower); err == nil && ok && cfg.Campaign {
			p.campaign(e)
		}
	}
	if e, ok := cfg.Transport.(electNower); ok && cfg.Elect {
		p.campaign(e)
	}
	p.wg.Add(3)
	go p.runProposer()
	go p.runResponder()
	go p.runLeaderDuties()
	return p, nil
}

// electNower is a transport that can make its own node's raft stand for
// election at once.
type electNower interface {
	ElectNow(ctx context.Context) error
}

// campaign makes the replica of a group it has just bootstrapped stand for
// election now. A failure only costs the wait for the heartbeat timeout.
func (p *Partition) campaign(e electNower) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ElectionTimeout)
	defer cancel()
	if err := e.ElectNow(ctx); err != nil {
		p.cfg.Logger.Debug("could not stand for election at once: waiting for the heartbeat timeout", "group", p.name, "err", err)
	}
}

// shutdownTimeout bounds how long Close waits for Raft's goroutines to end.
// With its transport closed, none of them waits on the network; what is
// left is a state machine batch or a snapshot being written.
const shutdownTimeout = 10 * time.Second

// Close stops the replica: pending operations fail (with OUTCOME_UNKNOWN
// for those already handed to Raft), Raft shuts down. State on disk is kept
// for the next Open; the log store belongs to the caller. Close returns
// within about shutdownTimeout whatever Raft does; when Raft has not
// stopped by then it reports an error, and the caller must not drop the
// replica's log, for Raft may still write it.
func (p *Partition) Close() error {
	var err error
	p.stopOnce.Do(func() {
		// The replica's goroutines and callers stop waiting on Raft first:
		// Raft may never answer some futures once it shuts down.
		close(p.stop)
		// StopGroup aborts the RPCs in flight too, so that Raft's
		// goroutines need not wait out their timeouts (Raft closes the
		// transport itself, but only after they ended).
		err = StopGroup(p.raft, p.cfg.Transport, shutdownTimeout)
		p.wg.Wait()
		p.failPending()
	})
	if err != nil {
		return fmt.Errorf("partition %s: close: %w", p.name, err)
	}
	return nil
}

// Name is the partition's name, e.g. "orders/3".
func (p *Partition) Name() string { return p.name }

// IsLeader reports whether this replica currently believes it leads.
func (p *Partition) IsLeader() bool { return p.raft.State() == raft.Leader }

// Leader returns the current leader's address and server id, empty when
// unknown.
func (p *Partition) Leader() (address, id string) { return p.leader() }

// Apply replicates cmd and returns the engine's result once the command is
// committed on a quorum and applied. Rejections by the engine come back as
// *Error with the engine's reason; so do NOT_LEADER (nothing was proposed),
// MESSAGE_SIZE_EXCEEDED (a command larger than MaxCommandBytes, not
// proposed) and OUTCOME_UNKNOWN (the command may or may not take effect).
func (p *Partition) Apply(ctx context.Context, cmd *enginev1.Command) (*enginev1.Result, error) {
	out := p.ApplyAll(ctx, []*enginev1.Command{cmd})
	return out[0].Result, out[0].Err
}

// Applied is the outcome of one command of ApplyAll: as Apply returns it.
type Applied struct {
	Result *enginev1.Result
	Err    error
}

// ApplyAll replicates cmds, in order, and returns each one's outcome as
// Apply would: commands proposed together go into the same log entries, so
// this costs about as much as one Apply. Each command succeeds or fails on
// its own.
func (p *Partition) ApplyAll(ctx context.Context, cmds []*enginev1.Command) []Applied {
	defer p.activity.begin()()
	out := make([]Applied, len(cmds))
	fail := func(err error) []Applied {
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = err
			}
		}
		return out
	}
	if p.raft.State() != raft.Leader {
		return fail(p.notLeader())
	}
	// Fail fast while the clock is not trusted; the proposer checks again
	// when it stamps.
	if _, err := p.Now(); err != nil {
		return fail(err)
	}
	proposed := make([]*proposal, len(cmds))
	group := make([]*proposal, 0, len(cmds))
	for i, cmd := range cmds {
		size := proto.Size(cmd)
		if size > MaxCommandBytes {
			out[i].Err = newError(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED,
				"partition %s: the request is %d bytes; raftbus replicates at most %d bytes of messages per request (%d KiB per message): send smaller messages, or fewer at once",
				p.name, size, MaxCommandBytes, engine.MaxMaxMessageSizeInKilobytes)
			continue
		}
		proposed[i] = &proposal{cmd: cmd, size: size + commandFraming, done: make(chan proposalResult, 1)}
		group = append(group, proposed[i])
	}
	if len(group) > 0 {
		// One send for them all: the proposer takes them together. A
		// caller already gone proposes nothing: with room in the queue
		// the select below would pick either way, and a command whose
		// caller gave up (a receive's lock) would still act.
		err := ctx.Err()
		if err == nil {
			select {
			case p.proposals <- group:
			case <-ctx.Done():
				err = ctx.Err() // nothing was proposed
			case <-p.stop:
				err = p.closing()
			}
		}
		if err != nil {
			for i, pr := range proposed {
				if pr != nil {
					out[i].Err, proposed[i] = err, nil
				}
			}
		}
	}
	for i, pr := range proposed {
		if pr == nil {
			continue
		}
		select {
		case r := <-pr.done:
			out[i].Result, out[i].Err = p.outcome(r)
		case <-p.stop:
			out[i].Err = p.proposalError(raft.ErrRaftShutdown)
		case <-ctx.Done():
			out[i].Err = &Error{
				Reason:    raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
				Message:   fmt.Sprintf("partition %s: %v while the operation was being replicated; it may or may not take effect", p.name, ctx.Err()),
				Retryable: true,
			}
		}
	}
	return out
}

// Read runs fn against the leader's state, after making sure this replica
// still leads and has applied everything committed before the read began
// (the read-index protocol), so a deposed leader never serves stale data.
// It gives up when ctx ends, returning ctx's error, even when Raft is
// stuck (a stalled disk holds up its main loop, and with it every request
// to Raft).
func (p *Partition) Read(ctx context.Context, fn func(e *engine.Engine)) error {
	defer p.activity.begin()()
	if p.raft.State() != raft.Leader || p.readyTerm.Load() != p.raft.CurrentTerm() {
		return p.notLeader()
	}
	readIndex := p.raft.CommitIndex()
	if _, err := awaitStarted(ctx, p.stop, p.raft.VerifyLeader); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return p.notLeader()
	}
	// The state machine's own index, not Raft's AppliedIndex, which runs
	// ahead of it (see fsm.applied). Entries Raft keeps from the state
	// machine (no-ops, barriers) are covered: readyTerm is set once this
	// term's barrier, the last such entry a leader writes, is applied.
	var pending []engine.PendingBody
	read := func(e *engine.Engine) {
		fn(e)
		pending = e.TakeBodies()
	}
	if err := p.fsm.readAt(ctx, p.stop, readIndex, read); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return p.notLeader()
	}
	return p.bodies.fill(pending)
}

// ReadApplied runs fn against this replica's applied state as it is, with
// no check of leadership or of what is committed but not yet applied: for
// facts that only ever become true, such as an entity having been
// configured. It fails only when the bodies of messages fn had handed
// out could not be read.
func (p *Partition) ReadApplied(fn func(e *engine.Engine)) error {
	var pending []engine.PendingBody
	p.fsm.read(func(e *engine.Engine) {
		fn(e)
		pending = e.TakeBodies()
	})
	return p.bodies.fill(pending)
}

// Await waits for a Raft future and returns its error, giving up when ctx
// ends (ctx.Err()) or stop is closed (raft.ErrRaftShutdown; a nil stop is
// never closed). Every wait on a Raft future needs such a way out: Raft
// leaves some futures unanswered when it shuts down, such as those of
// committed entries still queued for the state machine
// (hashicorp/raft#498). The goroutine that waits on a future nobody
// answers ends only with the process; the caller does not wait for it.
func Await(ctx context.Context, stop <-chan struct{}, f raft.Future) error {
	_, err := awaitStarted(ctx, stop, func() raft.Future { return f })
	return err
}

// awaitStarted asks Raft for a future with start and waits for it as
// Await does, returning the future once answered. start runs on the
// waiting goroutine, not the caller's: Raft hands requests to its main
// loop through channels (Barrier's unbuffered, VerifyLeader's holding 64),
// so asking blocks while that loop is stuck, on a stalled disk say. The
// goroutine ends when Raft takes the request and answers it, or shuts
// down.
func awaitStarted(ctx context.Context, stop <-chan struct{}, start func() raft.Future) (raft.Future, error) {
	type answer struct {
		f   raft.Future
		err error
	}
	done := make(chan answer, 1)
	go func() {
		f := start()
		done <- answer{f, f.Error()}
	}()
	select {
	case a := <-done:
		return a.f, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-stop:
		return nil, raft.ErrRaftShutdown
	}
}

// await waits for a Raft future of this replica (see Await), giving up
// when ctx ends or the replica stops.
func (p *Partition) await(ctx context.Context, f raft.Future) error {
	return Await(ctx, p.stop, f)
}

// Digest is a hash of the replica's state: replicas that applied the same
// log have the same digest.
func (p *Partition) Digest() [32]byte {
	var im *engine.Image
	p.fsm.read(func(e *engine.Engine) { im = e.Capture() })
	return im.Digest()
}

// Info describes the replica's Raft state.
type Info struct {
	State         raft.RaftState
	Term          uint64
	CommitIndex   uint64
	AppliedIndex  uint64
	LeaderID      string
	LeaderAddress string
}

// Info returns the replica's Raft state.
func (p *Partition) Info() Info {
	addr, id := p.leader()
	return Info{
		State:         p.raft.State(),
		Term:          p.raft.CurrentTerm(),
		CommitIndex:   p.raft.CommitIndex(),
		AppliedIndex:  p.raft.AppliedIndex(),
		LeaderID:      id,
		LeaderAddress: addr,
	}
}
