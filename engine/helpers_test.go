package engine

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	testQueue = "orders"
	startMs   = int64(1_700_000_000_000)
)

// harness drives one engine the way a partition leader would: it stamps
// time, a fresh token seed and the engine version into every command.
type harness struct {
	t     testing.TB
	e     *Engine
	now   int64
	seeds uint64
	// version is stamped into commands when set, else Version: a leader
	// of an older build.
	version *uint32
	// log stands for the partition's log: the harness numbers every
	// command as a log entry and hands the engine a reference for each
	// body it sends (see ApplyStored), then reads the bodies handed out
	// back from here, as a partition does. inline turns that off.
	log    *fakeLog
	inline bool
}

// fakeLog holds the bodies of sent messages by log index, as a
// partition's log holds its entries.
type fakeLog struct {
	next    uint64
	entries map[uint64][]byte
}

// refs numbers cmd as the next entry and returns the references of the
// bodies it sends, laid out one after another in the entry's data.
func (l *fakeLog) refs(cmd *enginev1.Command) []BodyRef {
	l.next++
	var msgs []*raftbusv1.Message
	switch b := cmd.GetBody().(type) {
	case *enginev1.Command_Send:
		msgs = b.Send.GetMessages()
	case *enginev1.Command_Schedule:
		msgs = b.Schedule.GetMessages()
	default:
		return nil
	}
	data := []byte("entry header")
	refs := make([]BodyRef, len(msgs))
	for i, m := range msgs {
		if len(m.GetBody()) > 0 {
			refs[i] = BodyRef{Index: l.next, Offset: uint32(len(data)), Length: uint32(len(m.GetBody()))}
			data = append(data, m.GetBody()...)
		}
	}
	l.entries[l.next] = data
	return refs
}

// resolve fills in the bodies of the messages handed out.
func (l *fakeLog) resolve(t testing.TB, pending []PendingBody) {
	t.Helper()
	for _, p := range pending {
		data, ok := l.entries[p.Ref.Index]
		if !ok || int(p.Ref.Offset+p.Ref.Length) > len(data) {
			t.Fatalf("a body reference to %+v, which the log does not hold", p.Ref)
		}
		if p.Message.Body != nil {
			t.Fatalf("a pending body already set: %+v", p)
		}
		p.Message.Body = data[p.Ref.Offset : p.Ref.Offset+p.Ref.Length]
	}
}

func newHarness(t testing.TB, props *raftbusv1.QueueProperties) *harness {
	t.Helper()
	h := &harness{t: t, e: New(0, 1), now: startMs, log: &fakeLog{entries: map[uint64][]byte{}}}
	h.configure(testQueue, props)
	return h
}

func (h *harness) seed() []byte {
	h.seeds++
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[:8], h.seeds*0x9E3779B97F4A7C15)
	binary.BigEndian.PutUint64(b[8:], mix64(h.seeds))
	return b
}

func (h *harness) apply(cmd *enginev1.Command) *enginev1.Result {
	h.t.Helper()
	cmd.NowUnixMs = h.now
	if cmd.TokenSeed == nil {
		cmd.TokenSeed = h.seed()
	}
	cmd.EngineVersion = Version
	if h.version != nil {
		cmd.EngineVersion = *h.version
	}
	var res *enginev1.Result
	if h.inline || h.log == nil {
		res = h.e.Apply(cmd)
	} else {
		res = h.e.ApplyStored(cmd, h.log.refs(cmd))
		h.log.resolve(h.t, h.e.TakeBodies())
	}
	checkInvariants(h.t, h.e)
	return res
}

func (h *harness) ok(cmd *enginev1.Command) *enginev1.Result {
	h.t.Helper()
	res := h.apply(cmd)
	if e := res.GetError(); e != nil {
		h.t.Fatalf("%T failed: %v: %s", cmd.GetBody(), e.GetReason(), e.GetMessage())
	}
	return res
}

func (h *harness) fails(cmd *enginev1.Command, reason raftbusv1.ErrorReason) *enginev1.Error {
	h.t.Helper()
	res := h.apply(cmd)
	if res.GetError().GetReason() != reason {
		h.t.Fatalf("%T: want error %v, got %v", cmd.GetBody(), reason, res)
	}
	return res.GetError()
}

func (h *harness) advance(d time.Duration) { h.now += d.Milliseconds() }

func (h *harness) configure(path string, props *raftbusv1.QueueProperties) {
	h.t.Helper()
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: path, Properties: props,
	}}})
}

func sendCmd(msgs ...*raftbusv1.Message) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testQueue, Messages: msgs}}}
}

func (h *harness) send(msgs ...*raftbusv1.Message) []*raftbusv1.SendResult {
	h.t.Helper()
	return h.ok(sendCmd(msgs...)).GetSend().GetMessages()
}

// sendN sends n messages with ids m0, m1, ... and returns their sequence
// numbers.
func (h *harness) sendN(n int) []int64 {
	h.t.Helper()
	var seqs []int64
	for i := range n {
		r := h.send(&raftbusv1.Message{MessageId: fmt.Sprintf("m%d", i), Body: []byte("body")})
		seqs = append(seqs, r[0].GetSequenceNumber())
	}
	return seqs
}

func lockCmd(sq raftbusv1.SubQueue, mode raftbusv1.ReceiveMode, n int32) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{
		EntityPath: testQueue, SubQueue: sq, ReceiveMode: mode, MaxMessages: n,
	}}}
}

func (h *harness) lock(n int32) []*raftbusv1.ReceivedMessage {
	h.t.Helper()
	return h.ok(lockCmd(raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, raftbusv1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK, n)).GetLock().GetMessages()
}

func (h *harness) lockDeadLetters(n int32) []*raftbusv1.ReceivedMessage {
	h.t.Helper()
	return h.ok(lockCmd(raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, raftbusv1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK, n)).GetLock().GetMessages()
}

func settleCmd(sq raftbusv1.SubQueue, token []byte, d enginev1.Disposition) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Settle{Settle: &enginev1.Settle{
		EntityPath: testQueue, SubQueue: sq, LockToken: token, Disposition: d,
	}}}
}

func (h *harness) settle(m *raftbusv1.ReceivedMessage, d enginev1.Disposition) {
	h.t.Helper()
	h.ok(settleCmd(raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, m.GetLockToken(), d))
}

func scheduleCmd(msgs ...*raftbusv1.Message) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Schedule{Schedule: &enginev1.Schedule{EntityPath: testQueue, Messages: msgs}}}
}

func cancelCmd(seqs ...int64) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_CancelScheduled{CancelScheduled: &enginev1.CancelScheduled{EntityPath: testQueue, SequenceNumbers: seqs}}}
}

func tickCmd() *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}}
}

func (h *harness) counts() *raftbusv1.PartitionRuntimeProperties {
	h.t.Helper()
	p, err := h.e.RuntimeProperties(testQueue)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) peek(sq raftbusv1.SubQueue, from int64, max int) []*raftbusv1.ReceivedMessage {
	h.t.Helper()
	ms, err := h.e.Peek(testQueue, sq, from, max, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.log != nil {
		h.log.resolve(h.t, h.e.TakeBodies())
	}
	return ms
}

func seqsOf(ms []*raftbusv1.ReceivedMessage) []int64 {
	var s []int64
	for _, m := range ms {
		s = append(s, m.GetSequenceNumber())
	}
	return s
}

func ids(ms []*raftbusv1.ReceivedMessage) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.GetMessage().GetMessageId())
	}
	return s
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// checkInvariants verifies that every index and count of every queue agrees
// with the messages stored.
func checkInvariants(t testing.TB, e *Engine) {
	t.Helper()
	if len(e.sorted) != len(e.entities) {
		t.Fatalf("%d sorted entities, %d in the map", len(e.sorted), len(e.entities))
	}
	checkTopicInvariants(t, e)
	checkReceiptInvariants(t, e)
	checkBodyPins(t, e)
	checkSettledInvariants(t, e)
	checkTransferInvariants(t, e)
	for i, ent := range e.sorted {
		if i > 0 && e.sorted[i-1].path >= ent.path {
			t.Fatalf("entities out of order at %q", ent.path)
		}
		checkSessionInvariants(t, ent)
		for _, q := range []*queue{ent.main, ent.deadLetter} {
			var n [stateTransfer + 1]int64
			var bytes, underSession int64
			var prev *message
			q.all.ascend(0, func(m *message) bool {
				if prev != nil && prev.order >= m.order {
					t.Fatalf("%s: sequence order broken", ent.path)
				}
				prev = m
				n[m.state]++
				bytes += m.size()
				if q.all.get(m.order) != m {
					t.Fatalf("%s: message %d not found by order", ent.path, m.seq)
				}
				if got := e.lookup(q, m.seq); got != m {
					t.Fatalf("%s: message %d not found by sequence number", ent.path, m.seq)
				}
				if m.state == stateLocked && q.locks[m.token] != m {
					t.Fatalf("%s: locked message %d not in the lock index", ent.path, m.seq)
				}
				// An available message's timer index is its place among
				// the returned ones.
				hasTimer := m.state == stateScheduled || (m.state == stateLocked && !m.underSessionLock)
				if m.state != stateAvailable && hasTimer != (m.timerIdx >= 0) {
					t.Fatalf("%s: message %d in state %d (under session lock %v), timer index %d", ent.path, m.seq, m.state, m.underSessionLock, m.timerIdx)
				}
				if m.underSessionLock {
					if s := q.sessionOf(m); m.state != stateLocked || s == nil || !s.held() || m.dueMs != s.lockedUntil {
						t.Fatalf("%s: message %d in state %d under the lock of session %v", ent.path, m.seq, m.state, s)
					}
					underSession++
				}
				if x := e.transfers.byMessage[m]; (x != nil) != (m.state == stateTransfer) || x != nil && (x.q != q || m.timerIdx >= 0 || m.expiryIdx >= 0) {
					t.Fatalf("%s: message %d in state %d, in transfer %v", ent.path, m.seq, m.state, x)
				}
				if q.deadLetter && m.expiryIdx >= 0 {
					t.Fatalf("%s: dead-lettered message %d has an expiry", ent.path, m.seq)
				}
				if !q.deadLetter && (m.state == stateAvailable || m.state == stateDeferred) && (m.expiryIdx >= 0) != (m.expiresMs != noExpiry) {
					t.Fatalf("%s: message %d in state %d expiring at %d has expiry index %d", ent.path, m.seq, m.state, m.expiresMs, m.expiryIdx)
				}
				return true
			})
			if n[stateAvailable] != q.availableCount || int64(q.fresh.Len()+q.returned.Len()) != q.availableCount ||
				n[stateLocked] != q.lockedCount || int64(len(q.locks)) != q.lockedCount ||
				n[stateDeferred] != q.deferredCount || n[stateScheduled] != q.scheduledCount || n[stateTransfer] != q.transferCount ||
				int64(q.timers.Len()) != q.lockedCount-underSession+q.scheduledCount || bytes != q.bytes {
				t.Fatalf("%s (dead-letter %v): counts %v bytes %d, recorded available %d locked %d deferred %d scheduled %d bytes %d",
					ent.path, q.deadLetter, n, bytes, q.availableCount, q.lockedCount, q.deferredCount, q.scheduledCount, q.bytes)
			}
			if t0, ok := q.nextEvent(); ok && t0 <= e.now {
				var desc string
				if m := q.timers.top(); m != nil {
					desc += fmt.Sprintf(" timer top: seq %d state %d due %d;", m.seq, m.state, m.dueMs)
				}
				if m := q.expiries.top(); m != nil {
					desc += fmt.Sprintf(" expiry top: seq %d state %d expires %d", m.seq, m.state, m.expiresMs)
				}
				t.Fatalf("%s (dead-letter %v): event due at %d not applied by %d:%s", ent.path, q.deadLetter, t0, e.now, desc)
			}
		}
	}
}

// checkReceiptInvariants verifies that the receipts kept are all live, in
// non-decreasing expiry order, indexed once each, and counted right.
func checkReceiptInvariants(t testing.TB, e *Engine) {
	t.Helper()
	live := e.receipts.live()
	var weight int
	var bytes int64
	for i, r := range live {
		if r.expiresMs <= e.now {
			t.Fatalf("receipt %x of %q expired at %d, kept at %d", r.id, r.path, r.expiresMs, e.now)
		}
		if i > 0 && live[i-1].expiresMs > r.expiresMs {
			t.Fatalf("receipts out of expiry order at %d", i)
		}
		if e.receipts.byKey[r.key] != r {
			t.Fatalf("receipt %x of %q not indexed", r.id, r.path)
		}
		weight += r.weight()
		bytes += r.bytes
	}
	if len(e.receipts.byKey) != len(live) || weight != e.receipts.weight || bytes != e.receipts.bytes {
		t.Fatalf("receipts: %d indexed, %d live; weight %d counted %d; bytes %d counted %d",
			len(e.receipts.byKey), len(live), weight, e.receipts.weight, bytes, e.receipts.bytes)
	}
	if len(live) > 1 && (weight > maxReceiptWeight || bytes > maxReceiptBytes) {
		t.Fatalf("receipts over their bounds: weight %d, bytes %d", weight, bytes)
	}
}

// checkTransferInvariants verifies that the transfers are indexed both
// ways, in number order, below the next number, each of a message in its
// queue.
func checkTransferInvariants(t testing.TB, e *Engine) {
	t.Helper()
	tt := &e.transfers
	if len(tt.byNumber) != len(tt.byMessage) {
		t.Fatalf("%d transfers by number, %d by message", len(tt.byNumber), len(tt.byMessage))
	}
	check := func(name string, l *numberList, to string) int {
		var prev uint64
		seen := 0
		for _, n := range l.numbers {
			if n <= prev {
				t.Fatalf("%s: transfer numbers out of order: %d after %d", name, n, prev)
			}
			prev = n
			x := tt.byNumber[n]
			if x == nil || (to != "" && x.to != to) {
				continue
			}
			seen++
			if x.number != n || n >= e.nextTransfer || tt.byMessage[x.m] != x || x.q.all.get(x.m.order) != x.m || x.m.state != stateTransfer {
				t.Fatalf("%s: transfer %d out of place", name, n)
			}
		}
		if seen != l.live {
			t.Fatalf("%s: %d live transfers, %d counted", name, seen, l.live)
		}
		return seen
	}
	if n := check("all", &tt.all, ""); n != len(tt.byNumber) {
		t.Fatalf("%d transfers in order, %d by number", n, len(tt.byNumber))
	}
	total := 0
	for to, l := range tt.byTarget {
		total += check("to "+to, l, to)
	}
	if total != len(tt.byNumber) {
		t.Fatalf("%d transfers by target, %d by number", total, len(tt.byNumber))
	}
	for to := range tt.claimed {
		if tt.byTarget[to] == nil {
			t.Fatalf("a claim for %q, to which nothing is in transfer", to)
		}
	}
}

// checkBodyPins recounts the body references of the stored messages and
// receipts and compares them with the pins the engine keeps.
func checkBodyPins(t testing.TB, e *Engine) {
	t.Helper()
	want := map[uint64]int64{}
	for _, ent := range e.sorted {
		for _, q := range [2]*queue{ent.main, ent.deadLetter} {
			q.all.ascend(0, func(m *message) bool {
				if m.ref.onDisk() {
					want[m.ref.Index]++
				}
				return true
			})
		}
	}
	for _, r := range e.receipts.live() {
		for _, ref := range r.removedRefs {
			if ref.onDisk() {
				want[ref.Index]++
			}
		}
	}
	got := map[uint64]int64{}
	for _, r := range e.pins.runs[e.pins.head:] {
		if r.n > 0 {
			got[r.index] = r.n
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("body pins %v, the state refers to %v", got, want)
	}
}
