package engine

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	counterBits63 = 1<<63 - 1
	tokenSeedSize = 16
)

// Version is the version of the semantics this build applies; the leader
// stamps it into every command it proposes (Command.engine_version). A
// change that gives a command, or a time effect, another outcome than
// before takes a new version, and the engine applies each command with the
// semantics of the version it carries: replicas replaying entries written
// by an older build then compute what that build computed, whatever
// snapshot each of them restarts from. (A replica on an older build than
// its leader cannot honour a newer version: nodes are upgraded together.)
//
//	0  entries written before versions existed
//	1  a dead-lettered message keeps its sequence number
//	2  a session receive hands out several messages of the session in
//	   order, locked under the session's lock
//	3  session states count towards MaxSizeInMegabytes
//	4  a repeat of a settlement that took effect succeeds (see settled.go)
//	5  forward_to and forward_dead_lettered_messages_to put messages in
//	   transfer (see transfer.go)
//	6  deferring a message that used its last delivery dead-letters it
//	7  the forwarder claims transfers before it sends them, and the
//	   unclaimed transfers to a deleted target are dead-lettered (see
//	   transfer.go)
//	8  a transfer mark keeps when it last rose, and the marks of deleted
//	   sources are forgotten (see transfermarks.go)
//	9  a settlement of a token already settled succeeds only as a repeat
//	   with the same settlement id (see settled.go); a message handed out
//	   that is not dead-lettered where it is takes its dead-letter reason
//	   and description from its application properties (see received)
const Version = 9

// Versions whose semantics code branches on.
const (
	versionDeadLetterKeepsSequence   = 1
	versionSessionLocksCoverMessages = 2
	versionQuotaCountsSessionState   = 3
	versionSettlementsRepeatable     = 4
	versionForwarding                = 5
	versionDeferUsesDelivery         = 6
	versionTransferClaims            = 7
	versionForgetTransferStreams     = 8
	versionSettlementIDs             = 9
	versionForwardedDeadLetterReason = 9
)

// Engine is the state of one partition: the slices of the entities placed
// in it. It is not safe for concurrent use; the partition layer applies
// commands from one goroutine and serves reads under the same lock.
type Engine struct {
	partitionID    uint32
	partitionCount uint32
	// nextOrder counts every sequence number handed out; the numbers are
	// made from it (see sequence).
	nextOrder uint64
	// now is the last applied command time, never decreasing.
	now      int64
	entities map[string]*entity
	sorted   []*entity // by path: the order of time effects and snapshots
	// receipts remember what recent receives received (see receipt.go).
	receipts receiptTable
	// settled remembers recent settlements (see settled.go).
	settled settledTable
	// generations is the highest metadata generation applied per entity
	// (see fence.go).
	generations map[string]uint64
	// nextTransfer numbers the next message put in transfer; transfers
	// are the messages in transfer (see transfer.go).
	nextTransfer uint64
	transfers    transferTable
	// version is the semantics version of the command being applied (see
	// Version); it is not state and no snapshot holds it.
	version uint32
	// pins counts the body references of the stored messages and
	// receipts by log index (see bodyref.go); it follows from the state.
	pins *bodyPins
	// pending are the messages handed out since TakeBodies whose bodies
	// are still to be read; not state.
	pending []PendingBody
}

// New returns the empty state of partition partitionID of partitionCount.
// With partitionCount 1 sequence numbers are a 63-bit counter; otherwise
// they are partitionID<<48 | a 48-bit counter that rolls over to 0.
func New(partitionID uint32, partitionCount uint32) *Engine {
	pins := &bodyPins{}
	return &Engine{
		partitionID:    partitionID,
		partitionCount: max(partitionCount, 1),
		nextOrder:      1,
		entities:       make(map[string]*entity),
		receipts:       newReceiptTable(pins),
		settled:        newSettledTable(),
		generations:    make(map[string]uint64),
		nextTransfer:   1,
		transfers:      newTransferTable(),
		pins:           pins,
		// Reads between commands hand out with this build's semantics.
		version: Version,
	}
}

// DecodeCommand decodes one command as stored in the log.
func DecodeCommand(b []byte) (*enginev1.Command, error) {
	cmd := &enginev1.Command{}
	if err := proto.Unmarshal(b, cmd); err != nil {
		return nil, invalidf("decode command: %v", err)
	}
	return cmd, nil
}

// Apply applies one command and returns its result. It first applies the
// time effects due at the command's time (clamped so that time never goes
// backwards). A failed command has no effect of its own and yields an Error
// result; a malformed one (INVALID_ARGUMENT before any lookup) and one made
// from an outdated entity definition (see fence.go) do not even advance the
// clock. Apply never panics on any input.
func (e *Engine) Apply(cmd *enginev1.Command) *enginev1.Result { return e.ApplyStored(cmd, nil) }

// ApplyStored applies cmd as Apply does, where refs says where the bodies
// of the messages it sends (a Send's or a Schedule's, in order) lie in the
// log: the engine keeps a reference instead of each body that has one (a
// nonzero Length that matches the body's). Every replica must pass the
// same references for the same command, for they are part of the state.
func (e *Engine) ApplyStored(cmd *enginev1.Command, refs []BodyRef) *enginev1.Result {
	e.pending = nil // what the caller did not take is of no use now
	if err := validate(cmd); err != nil {
		return errorResult(err)
	}
	fencedPath, generation, fenced := fenceOf(cmd)
	if fenced {
		if err := e.checkGeneration(fencedPath, generation); err != nil {
			return errorResult(err)
		}
	}
	e.version = min(cmd.GetEngineVersion(), Version)
	e.advance(max(cmd.GetNowUnixMs(), e.now))
	now := e.now
	var res *enginev1.Result
	var err *Error
	switch b := cmd.GetBody().(type) {
	case *enginev1.Command_ConfigureEntity:
		err = e.configure(b.ConfigureEntity)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntityResult{}}}
		}
	case *enginev1.Command_Send:
		var r []*raftbusv1.SendResult
		r, err = e.send(now, b.Send.GetEntityPath(), b.Send.GetMessages(), refs, false)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_Send{Send: &enginev1.SendResult{Messages: r}}}
		}
	case *enginev1.Command_Schedule:
		var r []*raftbusv1.SendResult
		r, err = e.send(now, b.Schedule.GetEntityPath(), b.Schedule.GetMessages(), refs, true)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_Schedule{Schedule: &enginev1.ScheduleResult{Messages: r}}}
		}
	case *enginev1.Command_CancelScheduled:
		var n int32
		n, err = e.cancelScheduled(b.CancelScheduled)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_CancelScheduled{CancelScheduled: &enginev1.CancelScheduledResult{Cancelled: n}}}
		}
	case *enginev1.Command_Lock:
		var r []*raftbusv1.ReceivedMessage
		r, err = e.receive(now, newTokenSource(cmd.GetTokenSeed()), b.Lock)
		if err == nil {
			res = locked(r)
		}
	case *enginev1.Command_ReceiveDeferred:
		var r []*raftbusv1.ReceivedMessage
		r, err = e.receiveDeferred(now, newTokenSource(cmd.GetTokenSeed()), b.ReceiveDeferred)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_ReceiveDeferred{ReceiveDeferred: &enginev1.LockResult{Messages: r}}}
		}
	case *enginev1.Command_Settle:
		err = e.settle(now, b.Settle)
		if err == nil {
			res = settled()
		}
	case *enginev1.Command_RenewLock:
		var until int64
		until, err = e.renewLock(now, b.RenewLock)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_RenewLock{RenewLock: &enginev1.RenewLockResult{LockedUntil: timestamp(until)}}}
		}
	case *enginev1.Command_Tick:
		res = &enginev1.Result{Result: &enginev1.Result_Tick{Tick: &enginev1.TickResult{}}}
	case *enginev1.Command_AddRule:
		if err = e.addRule(b.AddRule); err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_AddRule{AddRule: &enginev1.AddRuleResult{}}}
		}
	case *enginev1.Command_RemoveRule:
		if err = e.removeRule(b.RemoveRule); err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_RemoveRule{RemoveRule: &enginev1.RemoveRuleResult{}}}
		}
	case *enginev1.Command_AcceptSession:
		var r *enginev1.AcceptSessionResult
		r, err = e.acceptSession(now, newTokenSource(cmd.GetTokenSeed()), b.AcceptSession)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_AcceptSession{AcceptSession: r}}
		}
	case *enginev1.Command_RenewSessionLock:
		var until int64
		until, err = e.renewSessionLock(now, b.RenewSessionLock)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_RenewSessionLock{RenewSessionLock: &enginev1.RenewSessionLockResult{LockedUntil: timestamp(until)}}}
		}
	case *enginev1.Command_SetSessionState:
		err = e.setSessionState(b.SetSessionState)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_SetSessionState{SetSessionState: &enginev1.SetSessionStateResult{}}}
		}
	case *enginev1.Command_ReleaseSession:
		err = e.releaseSessionCommand(now, b.ReleaseSession)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_ReleaseSession{ReleaseSession: &enginev1.ReleaseSessionResult{}}}
		}
	case *enginev1.Command_AcceptTransfer:
		var r []*raftbusv1.SendResult
		r, err = e.acceptTransfer(now, b.AcceptTransfer)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_AcceptTransfer{AcceptTransfer: &enginev1.AcceptTransferResult{Messages: r}}}
		}
	case *enginev1.Command_CompleteTransfer:
		n := e.completeTransfer(b.CompleteTransfer)
		res = &enginev1.Result{Result: &enginev1.Result_CompleteTransfer{CompleteTransfer: &enginev1.CompleteTransferResult{Completed: n}}}
	case *enginev1.Command_ForgetTransferStreams:
		var n int32
		n, err = e.forgetTransferStreams(now, b.ForgetTransferStreams)
		if err == nil {
			res = &enginev1.Result{Result: &enginev1.Result_ForgetTransferStreams{ForgetTransferStreams: &enginev1.ForgetTransferStreamsResult{Forgotten: n}}}
		}
	default:
		err = invalidf("unknown command %T", b)
	}
	if err != nil {
		return errorResult(err)
	}
	if fenced {
		e.recordGeneration(fencedPath, generation)
	}
	return res
}

// settled is the result of a successful Settle, in one allocation: it is
// the most frequent command.
func settled() *enginev1.Result {
	b := &struct {
		res  enginev1.Result
		body enginev1.Result_Settle
		s    enginev1.SettleResult
	}{}
	b.body.Settle = &b.s
	b.res.Result = &b.body
	return &b.res
}

// locked is the result of a successful Lock, in one allocation: session
// receivers send one per message.
func locked(r []*raftbusv1.ReceivedMessage) *enginev1.Result {
	b := &struct {
		res  enginev1.Result
		body enginev1.Result_Lock
		l    enginev1.LockResult
	}{}
	b.l.Messages = r
	b.body.Lock = &b.l
	b.res.Result = &b.body
	return &b.res
}

// sequence hands out the next sequence number and its order.
func (e *Engine) sequence() (int64, uint64) {
	order := e.nextOrder
	e.nextOrder++
	if e.partitionCount > 1 {
		return raftbusv1.SequenceNumber(e.partitionID, order), order
	}
	return int64(order & counterBits63), order
}

// counterMask is the part of a sequence number the counter fills; the
// rest is the prefix every number of this partition has.
func (e *Engine) counterMask() (mask, prefix uint64) {
	if e.partitionCount > 1 {
		return 1<<raftbusv1.SequenceCounterBits - 1, uint64(raftbusv1.SequenceNumber(e.partitionID, 0))
	}
	return counterBits63, 0
}

// orderOf maps a sequence number to the order of the latest time it was
// handed out; ok is false when it never was.
func (e *Engine) orderOf(seq int64) (uint64, bool) {
	mask, prefix := e.counterMask()
	u := uint64(seq)
	if u&^mask != prefix {
		return 0, false
	}
	last := e.nextOrder - 1
	o := last&^mask | u&mask
	if o > last {
		if last&^mask == 0 {
			return 0, false
		}
		o -= mask + 1
	}
	return o, true
}

// lookup finds the message of q with sequence number seq, or nil.
func (e *Engine) lookup(q *queue, seq int64) *message {
	o, ok := e.orderOf(seq)
	if !ok {
		return nil
	}
	return q.all.get(o)
}

// peekStart maps a sequence number to the order a peek starts at: numbers
// below this partition's start at the beginning, numbers above it find
// nothing, and others count in the counter's current round.
func (e *Engine) peekStart(fromSeq int64) (uint64, bool) {
	mask, prefix := e.counterMask()
	u := uint64(fromSeq)
	switch {
	case fromSeq <= 0 && prefix == 0:
		return 0, true
	case u&^mask < prefix:
		return 0, true
	case u&^mask > prefix:
		return 0, false
	}
	return (e.nextOrder-1)&^mask | u&mask, true
}

// tokenSource derives the lock tokens of one command from its seed: the
// first half walks an odd-step sequence (distinct for every index), the
// second is a mixed hash of the index, so tokens of one command never
// collide and those of different commands collide only if seeds do.
type tokenSource struct {
	hi, lo, i uint64
}

func newTokenSource(seed []byte) *tokenSource {
	var s [tokenSeedSize]byte
	copy(s[:], seed)
	return &tokenSource{hi: binary.BigEndian.Uint64(s[:8]), lo: binary.BigEndian.Uint64(s[8:])}
}

// next returns a token not in use in q (skipping, deterministically, the
// rare one that is).
func (t *tokenSource) next(q *queue) lockToken {
	for {
		t.i++
		var tok lockToken
		binary.BigEndian.PutUint64(tok[:8], t.hi+t.i*0x9E3779B97F4A7C15)
		binary.BigEndian.PutUint64(tok[8:], mix64(t.lo^t.i))
		if _, taken := q.locks[tok]; !taken && tok != (lockToken{}) {
			return tok
		}
	}
}

// mix64 is the SplitMix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// addMs adds without overflowing.
func addMs(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (e *Engine) entity(path string) (*entity, *Error) {
	ent, ok := e.entities[path]
	if !ok {
		return nil, notFound(path)
	}
	return ent, nil
}

func (e *Engine) configure(c *enginev1.ConfigureEntity) *Error {
	path := c.GetEntityPath()
	if c.GetDelete() {
		e.deleteEntity(path)
		return nil
	}
	s, err := newSettings(c)
	if err != nil {
		return err
	}
	existing := e.entities[path]
	if existing != nil && s.requiresSession != existing.settings.requiresSession {
		return invalidf("requires_session of %q cannot be changed", path)
	}
	topic, rules, err := e.configureKind(existing, c)
	if err != nil {
		return err
	}
	if ent := existing; ent != nil {
		if !s.duplicateDetection {
			ent.duplicates = newDuplicateTable()
		}
		ent.settings = s
		e.reconfigureKind(ent, rules)
		return nil
	}
	ent := newEntity(path, s, e.pins)
	e.attachKind(ent, c, topic, rules)
	e.entities[path] = ent
	i, _ := slices.BinarySearchFunc(e.sorted, path, func(x *entity, p string) int { return strings.Compare(x.path, p) })
	e.sorted = slices.Insert(e.sorted, i, ent)
	return nil
}

// advance applies, in time order, every time effect due at or before now:
// lock expiries, scheduled activations, expiries by time to live and the
// end of duplicate detection windows and of receipts. Each effect happens at its own due
// time, so results do not depend on whether a Tick ran in between.
func (e *Engine) advance(now int64) {
	for {
		q, t := e.earliest()
		if q == nil || t > now {
			break
		}
		e.fire(q, t)
	}
	for _, ent := range e.sorted {
		ent.duplicates.prune(now)
	}
	e.receipts.prune(now)
	e.settled.prune(now)
	e.now = now
}

// earliest finds the queue with the earliest pending event; ties go to the
// first entity by path, main queue before dead-letter sub-queue.
func (e *Engine) earliest() (*queue, int64) {
	var best *queue
	var bestT int64
	for _, ent := range e.sorted {
		for _, q := range [2]*queue{ent.main, ent.deadLetter} {
			if t, ok := q.nextEvent(); ok && (best == nil || t < bestT) {
				best, bestT = q, t
			}
		}
	}
	return best, bestT
}

// NextDeadline reports the earliest time at which the engine has
// time-driven work; the leader proposes a Tick then. ok is false when there
// is none.
func (e *Engine) NextDeadline() (unixMs int64, ok bool) {
	if q, t := e.earliest(); q != nil {
		unixMs, ok = t, true
	}
	for _, ent := range e.sorted {
		if t, has := ent.duplicates.next(); has && (!ok || t < unixMs) {
			unixMs, ok = t, true
		}
	}
	// Receipts only hold memory once expired (a lookup checks the time), so
	// the deadline is when the newest ends and one Tick frees them all:
	// under traffic it keeps moving and commands prune them as they go.
	if t, has := e.receipts.last(); has && (!ok || t < unixMs) {
		unixMs, ok = t, true
	}
	if t, has := e.settled.last(); has && (!ok || t < unixMs) {
		unixMs, ok = t, true
	}
	return unixMs, ok
}

// HasAvailable reports whether a receive from the sub-queue would get a
// message now.
func (e *Engine) HasAvailable(entityPath string, subQueue raftbusv1.SubQueue) bool {
	ent, ok := e.entities[entityPath]
	if !ok {
		return false
	}
	q, err := ent.queue(subQueue)
	return err == nil && q.availableCount > 0
}

// OldestAvailable returns the enqueue time, in Unix milliseconds, of the
// message a receive from the sub-queue would get first, and whether there
// is one.
func (e *Engine) OldestAvailable(entityPath string, subQueue raftbusv1.SubQueue) (int64, bool) {
	ent, ok := e.entities[entityPath]
	if !ok {
		return 0, false
	}
	q, err := ent.queue(subQueue)
	if err != nil || q.availableCount == 0 {
		return 0, false
	}
	m := q.nextAvailable()
	if m == nil {
		return 0, false
	}
	return m.enqueuedMs, true
}

// RuntimeProperties returns the entity's counts in this partition, as of
// the last applied command. Active counts available and locked messages of
// the main queue (a locked message received by sequence number included);
// deferred counts deferred messages not locked; transfer the messages on
// their way to a forwarding target.
func (e *Engine) RuntimeProperties(entityPath string) (*raftbusv1.PartitionRuntimeProperties, error) {
	ent, err := e.entity(entityPath)
	if err != nil {
		return nil, err
	}
	var sessions int64
	if ent.main.sessions != nil {
		sessions = ent.main.sessions.withMessages
	}
	return &raftbusv1.PartitionRuntimeProperties{
		SessionCount:           sessions,
		PartitionId:            e.partitionID,
		ActiveMessageCount:     ent.main.availableCount + ent.main.lockedCount,
		ScheduledMessageCount:  ent.main.scheduledCount,
		DeferredMessageCount:   ent.main.deferredCount,
		DeadLetterMessageCount: ent.deadLetter.count(),
		LockedMessageCount:     ent.main.lockedCount,
		SizeInBytes:            ent.bytes(),
		TransferMessageCount:   ent.main.transferCount + ent.deadLetter.transferCount,
	}, nil
}
