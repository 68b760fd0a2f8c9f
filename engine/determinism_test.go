package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// workload generates a seeded random mix of every command against two
// entities, feeding on the results (lock tokens, sequence numbers) so that
// settlements and lookups hit real messages as well as stale ones.
type workload struct {
	rng *rand.Rand
	now int64
	// tickAt is the time of the last Tick. Clock steps backwards stay above
	// it: a Tick advances the clamped clock, so with a step below it the
	// engine that skips Ticks would legitimately see another time.
	tickAt int64
	tokens []heldLock
	seqs   []int64
	ids    int
	// held are the sessions of entity c accepted so far (some lost since).
	held []heldSessionLock
	// receives are recent receives with a receive id, to repeat.
	receives   []*enginev1.Command
	receiveIDs int
	repeated   bool // the last command is a repeat
	// version is the engine version the commands carry.
	version uint32
	// transfers reads the reference engine's oldest transfers, to complete
	// real ones (nil: none are known); streams counts the transfers sent into the workload per
	// source stream.
	transfers func() []Transfer
	streams   [2]uint64
}

type heldLock struct {
	entity  string
	sub     raftbusv1.SubQueue
	token   []byte
	session heldSessionLock // the session it was received under, if any
}

// Entity c requires sessions; see sessionOp.
var workloadEntities = []string{"a", "b", "c"}

// The topic of the workload and its subscriptions: receives go to the
// subscriptions, sends to the topic. "w" comes and goes.
var (
	workloadTopic         = "t"
	workloadSubscriptions = []string{"t/subscriptions/w", "t/subscriptions/x", "t/subscriptions/y", "t/subscriptions/z"}
)

// workloadTopicSetup configures the topic: x takes everything, y the
// messages with an even k (and marks them), z fails to evaluate on k.
func workloadTopicSetup() []*enginev1.Command {
	conf := func(c *enginev1.ConfigureEntity) *enginev1.Command {
		return &enginev1.Command{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: c}}
	}
	return []*enginev1.Command{
		conf(&enginev1.ConfigureEntity{EntityPath: workloadTopic, MaxSizeBytes: 2 << 20, Topic: &raftbusv1.TopicProperties{
			DefaultMessageTimeToLive: dur(30 * time.Second), RequiresDuplicateDetection: ptr(true), DuplicateDetectionHistoryTimeWindow: dur(time.Minute),
		}}),
		conf(&enginev1.ConfigureEntity{EntityPath: workloadSubscriptions[1], Subscription: &raftbusv1.SubscriptionProperties{
			LockDuration: dur(5 * time.Second), MaxDeliveryCount: ptr[int32](3),
		}}),
		conf(&enginev1.ConfigureEntity{EntityPath: workloadSubscriptions[2], Subscription: &raftbusv1.SubscriptionProperties{LockDuration: dur(8 * time.Second)},
			Rules: []*raftbusv1.RuleProperties{withAction(sqlRule("even", "k % 2 = 0"), "SET even = TRUE")}}),
		conf(&enginev1.ConfigureEntity{EntityPath: workloadSubscriptions[3], Subscription: &raftbusv1.SubscriptionProperties{},
			Rules: []*raftbusv1.RuleProperties{sqlRule("typed", "k > 'a'"), sqlRule("subject", "sys.Label = 's'")}}),
	}
}

func workloadSetup() []*enginev1.Command {
	return append([]*enginev1.Command{
		{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: "a", MaxSizeBytes: 2 << 20, Properties: &raftbusv1.QueueProperties{
			LockDuration: dur(5 * time.Second), MaxDeliveryCount: ptr[int32](3), DefaultMessageTimeToLive: dur(2 * time.Minute),
			DeadLetteringOnMessageExpiration: ptr(true), RequiresDuplicateDetection: ptr(true), DuplicateDetectionHistoryTimeWindow: dur(time.Minute),
		}}}},
		{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: "b", Properties: &raftbusv1.QueueProperties{
			LockDuration: dur(10 * time.Second), MaxMessageSizeInKilobytes: ptr[int64](2),
		}}}},
		{NowUnixMs: startMs, Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: "c", Properties: &raftbusv1.QueueProperties{
			RequiresSession: ptr(true), LockDuration: dur(30 * time.Second), MaxDeliveryCount: ptr[int32](3), DefaultMessageTimeToLive: dur(3 * time.Minute),
		}}}},
	}, workloadTopicSetup()...)
}

func newWorkload(seed uint64) *workload {
	return &workload{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), now: startMs, version: Version}
}

func (w *workload) pick(xs []int64) int64 {
	if len(xs) == 0 || w.rng.IntN(10) == 0 {
		return w.rng.Int64N(1 << 20)
	}
	return xs[w.rng.IntN(len(xs))]
}

func (w *workload) message() *raftbusv1.Message {
	w.ids++
	m := &raftbusv1.Message{MessageId: fmt.Sprintf("id-%d", w.rng.IntN(w.ids+1)), Body: make([]byte, w.rng.IntN(2500))}
	switch w.rng.IntN(8) {
	case 0:
		m.TimeToLive = dur(time.Duration(1+w.rng.IntN(90)) * time.Second)
	case 1:
		m.ScheduledEnqueueTime = timestamp(w.now + w.rng.Int64N(60_000) - 5_000)
	case 2:
		m.Subject, m.ApplicationProperties = "s", map[string]*raftbusv1.PropertyValue{"k": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: int64(w.ids)}}}
	}
	return m
}

func (w *workload) next() *enginev1.Command {
	if w.rng.IntN(50) == 0 {
		w.now = max(w.now-w.rng.Int64N(10_000), w.tickAt) // a leader with a slower clock
	} else {
		w.now += w.rng.Int64N(600)
	}
	seed := make([]byte, 16)
	for i := range seed {
		seed[i] = byte(w.rng.Uint32())
	}
	cmd := &enginev1.Command{NowUnixMs: w.now, TokenSeed: seed, EngineVersion: w.version}
	w.repeated = len(w.receives) > 0 && w.rng.IntN(20) == 0
	if w.repeated {
		// A receive repeated after its answer was lost.
		cmd.Body = proto.Clone(w.receives[w.rng.IntN(len(w.receives))]).(*enginev1.Command).Body
		return cmd
	}
	defer w.withReceiveID(cmd)
	ent := workloadEntities[w.rng.IntN(len(workloadEntities))]
	sender, receiver := ent, ent
	if w.rng.IntN(3) == 0 {
		sender, receiver = workloadTopic, workloadSubscriptions[w.rng.IntN(len(workloadSubscriptions))]
	}
	sub := mainQueue
	if w.rng.IntN(6) == 0 {
		sub = deadLetter
	}
	mode := peekLock
	if w.rng.IntN(8) == 0 {
		mode = receiveDel
	}
	if ent == "c" && w.rng.IntN(2) == 0 {
		w.sessionOp(cmd, mode)
		return cmd
	}
	switch op := w.rng.IntN(100); {
	case op < 25:
		msgs := make([]*raftbusv1.Message, 1+w.rng.IntN(4))
		for i := range msgs {
			msgs[i] = w.message()
			if ent == "c" {
				msgs[i].SessionId = w.sessionID()
			}
		}
		cmd.Body = &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: sender, Messages: msgs}}
	case op < 30:
		m := w.message()
		m.ScheduledEnqueueTime = timestamp(w.now + w.rng.Int64N(30_000))
		if ent == "c" {
			m.SessionId = w.sessionID()
		}
		cmd.Body = &enginev1.Command_Schedule{Schedule: &enginev1.Schedule{EntityPath: sender, Messages: []*raftbusv1.Message{m}}}
	case op < 33:
		cmd.Body = &enginev1.Command_CancelScheduled{CancelScheduled: &enginev1.CancelScheduled{EntityPath: sender, SequenceNumbers: []int64{w.pick(w.seqs)}}}
	case op < 53:
		cmd.Body = &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: receiver, SubQueue: sub, ReceiveMode: mode, MaxMessages: int32(1 + w.rng.IntN(5)),
			MaxBytes: w.maxBytes()}}
	case op < 83, op < 88:
		var l heldLock
		if len(w.tokens) > 0 {
			i := w.rng.IntN(len(w.tokens))
			if w.rng.IntN(5) != 0 { // mostly a recent lock
				i = len(w.tokens) - 1 - w.rng.IntN(min(len(w.tokens), 10))
			}
			l = w.tokens[i]
			w.tokens[i] = w.tokens[len(w.tokens)-1]
			w.tokens = w.tokens[:len(w.tokens)-1]
		} else {
			l = heldLock{entity: receiver, token: seed}
		}
		if op >= 83 {
			cmd.Body = &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: l.entity, SubQueue: l.sub, LockToken: l.token,
				SessionId: l.session.id, SessionLockToken: l.session.token}}
			w.tokens = append(w.tokens, l)
			break
		}
		s := &enginev1.Settle{EntityPath: l.entity, SubQueue: l.sub, LockToken: l.token, Disposition: enginev1.Disposition(1 + w.rng.IntN(4)),
			SessionId: l.session.id, SessionLockToken: l.session.token}
		if s.Disposition == deadLetterIt {
			s.DeadLetterReason = "workload"
		}
		if k := w.rng.IntN(3); k > 0 {
			// Two ids and none: repeats, second settlements and both
			// without an id.
			s.SettlementId = []byte{byte(k)}
		}
		if s.Disposition != complete && w.rng.IntN(3) == 0 {
			s.PropertiesToModify = map[string]*raftbusv1.PropertyValue{"p": {Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}}}
		}
		cmd.Body = &enginev1.Command_Settle{Settle: s}
	case op < 93:
		cmd.Body = &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{EntityPath: receiver, SubQueue: sub, ReceiveMode: mode, SequenceNumbers: []int64{w.pick(w.seqs)}}}
	case op < 97:
		cmd.Body = &enginev1.Command_Tick{Tick: &enginev1.Tick{}}
		w.tickAt = max(w.tickAt, w.now)
	case op < 99:
		w.transferOp(cmd, sender)
	case w.rng.IntN(2) == 0:
		w.ruleChange(cmd)
	default:
		cmd.Body = &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: "b", Properties: &raftbusv1.QueueProperties{
			LockDuration: dur(time.Duration(1+w.rng.IntN(20)) * time.Second), MaxDeliveryCount: ptr(int32(1 + w.rng.IntN(5))), MaxMessageSizeInKilobytes: ptr[int64](2),
			ForwardTo: []string{"", "", "elsewhere"}[w.rng.IntN(3)], ForwardDeadLetteredMessagesTo: []string{"", "errors"}[w.rng.IntN(2)],
		}}}
	}
	return cmd
}

// transferOp completes (or fails) some of the oldest transfers, or
// forwards messages into entity, now and then repeating earlier ones.
func (w *workload) transferOp(cmd *enginev1.Command, entity string) {
	if w.rng.IntN(2) == 0 {
		c := &enginev1.CompleteTransfer{Numbers: []uint64{w.rng.Uint64N(1 << 10)}}
		var pending []Transfer
		if w.transfers != nil {
			pending = w.transfers()
		}
		for _, x := range pending {
			switch w.rng.IntN(6) {
			case 0:
				c.Failed = append(c.Failed, &enginev1.FailedTransfer{Number: x.Number, Description: "refused"})
			case 1, 2:
				c.Numbers = append(c.Numbers, x.Number)
			case 3:
				c.Claims = append(c.Claims, &enginev1.TransferClaim{Target: x.To, UpTo: x.Number + w.rng.Uint64N(3)})
			case 4:
				if w.rng.IntN(4) == 0 {
					c.Gone = append(c.Gone, &enginev1.GoneTarget{Target: x.To, SentUpTo: x.Number - w.rng.Uint64N(2), Description: "deleted"})
				}
			}
		}
		cmd.Body = &enginev1.Command_CompleteTransfer{CompleteTransfer: c}
		return
	}
	if w.rng.IntN(8) == 0 {
		// A source deleted: its stream forgotten once quiet.
		cmd.Body = &enginev1.Command_ForgetTransferStreams{ForgetTransferStreams: &enginev1.ForgetTransferStreams{
			EntityPath: entity, Streams: []string{fmt.Sprintf("source@1/%d", w.rng.IntN(len(w.streams)))}, UnusedForMs: w.rng.Int64N(60_000),
		}}
		return
	}
	s := w.rng.IntN(len(w.streams))
	from := w.streams[s] + 1
	if w.rng.IntN(3) == 0 && from > 3 {
		from -= uint64(1 + w.rng.IntN(3)) // an answer lost
	}
	a := &enginev1.AcceptTransfer{EntityPath: entity, Stream: fmt.Sprintf("source@1/%d", s)}
	for i := range 1 + w.rng.IntN(3) {
		m := w.message()
		if entity == "c" {
			m.SessionId = w.sessionID()
		}
		a.Messages = append(a.Messages, &enginev1.TransferredMessage{Number: from + uint64(i), Message: m})
	}
	w.streams[s] = max(w.streams[s], from+uint64(len(a.Messages))-1)
	cmd.Body = &enginev1.Command_AcceptTransfer{AcceptTransfer: a}
}

// ruleChange creates or deletes the subscription w, or adds or removes one
// of its rules.
func (w *workload) ruleChange(cmd *enginev1.Command) {
	sub := workloadSubscriptions[0]
	rule := []string{"a", "b", "c"}[w.rng.IntN(3)]
	switch w.rng.IntN(4) {
	case 0:
		cmd.Body = &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: sub,
			Subscription: &raftbusv1.SubscriptionProperties{LockDuration: dur(3 * time.Second), DeadLetteringOnFilterEvaluationExceptions: ptr(w.rng.IntN(2) == 0),
				ForwardTo: []string{"", "elsewhere"}[w.rng.IntN(2)], ForwardDeadLetteredMessagesTo: []string{"", "errors"}[w.rng.IntN(2)]}}}
	case 1:
		cmd.Body = &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: sub, Delete: true}}
	case 2:
		cmd.Body = &enginev1.Command_AddRule{AddRule: &enginev1.AddRule{EntityPath: sub, Rule: withAction(sqlRule(rule, fmt.Sprintf("k %% 3 = %d OR k = 'x'", w.rng.IntN(3))), "SET r = '"+rule+"'")}}
	default:
		cmd.Body = &enginev1.Command_RemoveRule{RemoveRule: &enginev1.RemoveRule{EntityPath: sub, RuleName: rule}}
	}
}

// withReceiveID gives half the receives a receive id (some of the Locks
// as replays) and remembers them for repeating.
func (w *workload) withReceiveID(cmd *enginev1.Command) {
	var id *[]byte
	switch b := cmd.GetBody().(type) {
	case *enginev1.Command_Lock:
		id = &b.Lock.ReceiveId
	case *enginev1.Command_ReceiveDeferred:
		id = &b.ReceiveDeferred.ReceiveId
	default:
		return
	}
	if w.rng.IntN(2) == 0 {
		return
	}
	if l := cmd.GetLock(); l != nil {
		l.Replay = w.rng.IntN(10) == 0
	}
	w.receiveIDs++
	*id = []byte(fmt.Sprintf("r%d", w.receiveIDs))
	w.receives = append(w.receives, &enginev1.Command{Body: proto.Clone(cmd).(*enginev1.Command).Body})
	if len(w.receives) > 20 {
		w.receives = w.receives[1:]
	}
}

func (w *workload) sessionID() string { return fmt.Sprintf("s%d", w.rng.IntN(6)) }

// session picks a session of entity c: mostly one accepted lately (maybe
// lost since), sometimes one never held.
func (w *workload) session() heldSessionLock {
	if len(w.held) == 0 || w.rng.IntN(10) == 0 {
		tok := make([]byte, 16)
		tok[0] = byte(w.rng.Uint32())
		return heldSessionLock{w.sessionID(), tok}
	}
	return w.held[len(w.held)-1-w.rng.IntN(min(len(w.held), 4))]
}

// sessionOp is a command of the session protocol against entity c.
func (w *workload) sessionOp(cmd *enginev1.Command, mode raftbusv1.ReceiveMode) {
	switch op := w.rng.IntN(100); {
	case op < 25:
		id := ""
		if w.rng.IntN(3) == 0 {
			id = w.sessionID()
		}
		cmd.Body = &enginev1.Command_AcceptSession{AcceptSession: &enginev1.AcceptSession{EntityPath: "c", SessionId: id}}
	case op < 60:
		s := w.session()
		cmd.Body = &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: "c", ReceiveMode: mode, MaxMessages: int32(1 + w.rng.IntN(3)),
			SessionId: s.id, SessionLockToken: s.token, MaxBytes: w.maxBytes()}}
	case op < 70:
		s := w.session()
		cmd.Body = &enginev1.Command_RenewSessionLock{RenewSessionLock: &enginev1.RenewSessionLock{EntityPath: "c", SessionId: s.id, LockToken: s.token}}
	case op < 80:
		s := w.session()
		state := make([]byte, w.rng.IntN(3)*50)
		cmd.Body = &enginev1.Command_SetSessionState{SetSessionState: &enginev1.SetSessionState{EntityPath: "c", SessionId: s.id, LockToken: s.token, State: state}}
	case op < 90:
		s := w.session()
		cmd.Body = &enginev1.Command_ReleaseSession{ReleaseSession: &enginev1.ReleaseSession{EntityPath: "c", SessionId: s.id, LockToken: s.token}}
	default:
		s := w.session()
		cmd.Body = &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{EntityPath: "c", ReceiveMode: mode,
			SequenceNumbers: []int64{w.pick(w.seqs)}, SessionId: s.id, SessionLockToken: s.token}}
	}
}

// maxBytes is a receive's byte budget: none, or room for a few messages.
func (w *workload) maxBytes() int64 { return int64(w.rng.IntN(3)) * 3000 }

// observe remembers the tokens and sequence numbers a result handed out.
func (w *workload) observe(cmd *enginev1.Command, res *enginev1.Result) {
	var got []*raftbusv1.ReceivedMessage
	var ent string
	var sub raftbusv1.SubQueue
	var session heldSessionLock
	switch {
	case res.GetLock() != nil:
		c := cmd.GetLock()
		got, ent, sub = res.GetLock().GetMessages(), c.GetEntityPath(), c.GetSubQueue()
		session = heldSessionLock{c.GetSessionId(), c.GetSessionLockToken()}
	case res.GetReceiveDeferred() != nil:
		c := cmd.GetReceiveDeferred()
		got, ent, sub = res.GetReceiveDeferred().GetMessages(), c.GetEntityPath(), c.GetSubQueue()
		session = heldSessionLock{c.GetSessionId(), c.GetSessionLockToken()}
	case res.GetAcceptSession().GetSessionId() != "":
		a := res.GetAcceptSession()
		w.held = append(w.held, heldSessionLock{a.GetSessionId(), a.GetLockToken()})
		if len(w.held) > 20 {
			w.held = w.held[len(w.held)-20:]
		}
	}
	for _, m := range got {
		if len(m.GetLockToken()) > 0 {
			l := heldLock{entity: ent, sub: sub, token: m.GetLockToken()}
			if w.rng.IntN(4) != 0 { // settle without the session now and then
				l.session = session
			}
			w.tokens = append(w.tokens, l)
		}
		w.seqs = append(w.seqs, m.GetSequenceNumber())
	}
	for _, r := range append(res.GetSend().GetMessages(), res.GetSchedule().GetMessages()...) {
		w.seqs = append(w.seqs, r.GetSequenceNumber())
	}
	if len(w.tokens) > 300 {
		w.tokens = w.tokens[len(w.tokens)-300:]
	}
	if len(w.seqs) > 300 {
		w.seqs = w.seqs[len(w.seqs)-300:]
	}
}

// TestSeededWorkloadIsDeterministicAcrossSnapshotAndTicks applies a random
// workload to three engines: a reference, one snapshotted and restored
// halfway, and one that never sees a Tick. Every result of every engine
// must match (Ticks aside) and so must the final state digests. The first
// quarter of the commands carry engine version 0, as if written by a build
// before versions; a leader of this build writes the rest.
func TestSeededWorkloadIsDeterministicAcrossSnapshotAndTicks(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	ref, restored, tickless := New(0, 1), New(0, 1), New(0, 1)
	for _, cmd := range workloadSetup() {
		for _, e := range []*Engine{ref, restored, tickless} {
			e.Apply(cmd)
		}
	}
	w := newWorkload(42)
	w.version = 0
	w.transfers = func() []Transfer { return ref.Transfers(1+w.rng.IntN(8), 1<<20) }
	var transfers int
	var failures, deliveries, copies, sessionDeliveries, repeats int
	reasons := map[raftbusv1.ErrorReason]int{}
	for i := range n {
		if i == n/4 {
			w.version = Version
		}
		if i == n/2 {
			var buf bytes.Buffer
			if err := restored.Snapshot(&buf); err != nil {
				t.Fatal(err)
			}
			restored = New(9, 9) // Restore replaces everything
			if err := restored.Restore(&buf); err != nil {
				t.Fatal(err)
			}
		}
		cmd := w.next()
		want := ref.Apply(cmd)
		if got := restored.Apply(cmd); !proto.Equal(got, want) {
			t.Fatalf("command %d (%T): restored engine gave\n%v\nwant\n%v", i, cmd.GetBody(), brief(got), brief(want))
		}
		if cmd.GetTick() == nil {
			if got := tickless.Apply(cmd); !proto.Equal(got, want) {
				t.Fatalf("command %d (%T): engine without ticks gave\n%v\nwant\n%v", i, cmd.GetBody(), brief(got), brief(want))
			}
		}
		if want.GetError() != nil {
			failures++
			reasons[want.GetError().GetReason()]++
		}
		deliveries += len(want.GetLock().GetMessages())
		if n := cmd.GetCompleteTransfer(); n != nil {
			transfers += int(want.GetCompleteTransfer().GetCompleted())
		}
		if _, _, ok := splitSubscriptionPath(cmd.GetLock().GetEntityPath()); ok {
			copies += len(want.GetLock().GetMessages())
		}
		if cmd.GetLock().GetSessionId() != "" {
			sessionDeliveries += len(want.GetLock().GetMessages())
		}
		if w.repeated && len(want.GetLock().GetMessages())+len(want.GetReceiveDeferred().GetMessages()) > 0 {
			repeats++
		}
		w.observe(cmd, want)
		if i%5000 == 0 {
			checkInvariants(t, ref)
			checkInvariants(t, restored)
			for _, ent := range append(append([]string{workloadTopic}, workloadEntities...), workloadSubscriptions...) {
				a, _ := ref.RuntimeProperties(ent)
				b, _ := restored.RuntimeProperties(ent)
				if !proto.Equal(a, b) {
					t.Fatalf("command %d: runtime properties differ: %v vs %v", i, a, b)
				}
			}
		}
	}
	final := &enginev1.Command{NowUnixMs: w.now, Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}}
	for _, e := range []*Engine{ref, restored, tickless} {
		e.Apply(final)
		checkInvariants(t, e)
	}
	if ref.Digest() != restored.Digest() || ref.Digest() != tickless.Digest() {
		t.Fatal("final state digests differ")
	}
	if deliveries < n/5 || copies < n/25 || sessionDeliveries < n/50 || repeats < n/200 || failures > n/2 || transfers < n/200 {
		t.Fatalf("the workload is too idle: %d deliveries (%d from subscriptions, %d in sessions, %d repeats answered), %d failures of %d: %v",
			deliveries, copies, sessionDeliveries, repeats, failures, n, reasons)
	}
	t.Logf("%d commands, %d deliveries (%d from subscriptions, %d in sessions, %d repeats answered), %d transfers ended, %d failed commands %v",
		n, deliveries, copies, sessionDeliveries, repeats, transfers, failures, reasons)
}

// brief is a result without message bodies, for failure output.
func brief(r *enginev1.Result) *enginev1.Result {
	r = proto.Clone(r).(*enginev1.Result)
	for _, m := range append(r.GetLock().GetMessages(), r.GetReceiveDeferred().GetMessages()...) {
		m.GetMessage().Body = nil
	}
	return r
}
