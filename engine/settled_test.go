package engine

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// settleWithID is settleCmd with a settlement id.
func settleWithID(sq raftbusv1.SubQueue, token []byte, d enginev1.Disposition, id string) *enginev1.Command {
	cmd := settleCmd(sq, token, d)
	if id != "" {
		cmd.GetSettle().SettlementId = []byte(id)
	}
	return cmd
}

var dispositions = []enginev1.Disposition{complete, abandon, deadLetterIt, deferIt}

// A settlement repeated after its answer was lost, with the settlement id
// of the first attempt, succeeds and changes nothing, for every
// disposition; the same token used for anything else still finds the
// lock lost.
func TestRepeatedSettlementSucceedsWithoutEffect(t *testing.T) {
	for _, d := range dispositions {
		t.Run(d.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			h.sendN(2)
			m := h.lock(1)[0]
			h.ok(settleWithID(mainQueue, m.GetLockToken(), d, "first"))
			before := h.e.Digest()
			h.ok(settleWithID(mainQueue, m.GetLockToken(), d, "first"))
			if h.e.Digest() != before {
				t.Fatal("the repeat changed the state")
			}
			for _, other := range dispositions {
				if other != d {
					h.fails(settleWithID(mainQueue, m.GetLockToken(), other, "first"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
				}
			}
			h.fails(renewCmd(m.GetLockToken()), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
			other := settleWithID(raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, m.GetLockToken(), d, "first")
			if d == deadLetterIt {
				other.GetSettle().Disposition = complete
			}
			h.fails(other, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
			if h.e.Digest() != before {
				t.Fatal("refused settlements changed the state")
			}
		})
	}
}

// A second settlement of a message already settled, one that is not a
// repeat of the first (another settlement id, or none), fails with
// MESSAGE_LOCK_LOST and changes nothing, as in Service Bus, whatever the
// two dispositions; the first's own repeat still succeeds.
func TestSecondSettlementOfASettledMessageFindsTheLockLost(t *testing.T) {
	for _, first := range dispositions {
		for _, second := range dispositions {
			t.Run(first.String()+"_then_"+second.String(), func(t *testing.T) {
				h := newHarness(t, nil)
				h.sendN(1)
				m := h.lock(1)[0]
				h.ok(settleWithID(mainQueue, m.GetLockToken(), first, "first"))
				before := h.e.Digest()
				h.fails(settleWithID(mainQueue, m.GetLockToken(), second, "second"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
				h.fails(settleWithID(mainQueue, m.GetLockToken(), second, ""), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
				if h.e.Digest() != before {
					t.Fatal("a refused second settlement changed the state")
				}
				h.ok(settleWithID(mainQueue, m.GetLockToken(), first, "first"))
			})
		}
	}
}

// A settlement without an id cannot be told from a second one: it is
// not remembered, and a settlement of its token after it finds the lock
// lost, whatever id it comes with.
func TestSettlementWithoutAnIDIsNotRemembered(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(1)
	m := h.lock(1)[0]
	h.settle(m, complete)
	if n := len(h.e.settled.live()); n != 0 {
		t.Fatalf("%d settlements remembered", n)
	}
	h.fails(settleCmd(mainQueue, m.GetLockToken(), complete), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	h.fails(settleWithID(mainQueue, m.GetLockToken(), complete, "late"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
}

// Entries written before settlement ids replay as they were applied then:
// a settlement of a settled token with the same disposition succeeds,
// whatever its id, and one with another disposition finds the lock lost.
// A settlement such an entry left behind has no id, so that a settlement
// of the current version never takes itself for its repeat.
func TestSettlementsBeforeIDsRepeatByDisposition(t *testing.T) {
	h := newHarness(t, nil)
	h.version = ptr[uint32](versionSettlementIDs - 1)
	h.sendN(1)
	m := h.lock(1)[0]
	h.ok(settleWithID(mainQueue, m.GetLockToken(), complete, "ignored"))
	before := h.e.Digest()
	h.ok(settleCmd(mainQueue, m.GetLockToken(), complete))
	h.ok(settleWithID(mainQueue, m.GetLockToken(), complete, "other"))
	h.fails(settleCmd(mainQueue, m.GetLockToken(), abandon), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	if h.e.Digest() != before {
		t.Fatal("repeats changed the state")
	}
	if live := h.e.settled.live(); len(live) != 1 || live[0].id != "" {
		t.Fatalf("settlements kept: %+v, want one without an id", live)
	}
	h.version = nil
	h.fails(settleCmd(mainQueue, m.GetLockToken(), complete), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	h.fails(settleWithID(mainQueue, m.GetLockToken(), complete, "ignored"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
}

func TestSettlementIDIsBounded(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(1)
	m := h.lock(1)[0]
	h.fails(settleWithID(mainQueue, m.GetLockToken(), complete, strings.Repeat("x", maxSettlementIDSize+1)), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	h.ok(settleWithID(mainQueue, m.GetLockToken(), complete, strings.Repeat("x", maxSettlementIDSize)))
}

// A lock that expired was never settled: its token finds the lock lost,
// the message is delivered again.
func TestExpiredLockIsNotTakenForASettlement(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(5 * time.Second)})
	h.sendN(1)
	m := h.lock(1)[0]
	h.advance(6 * time.Second)
	h.fails(settleCmd(mainQueue, m.GetLockToken(), complete), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	if again := h.lock(1); len(again) != 1 || again[0].GetDeliveryCount() != 2 {
		t.Fatalf("after the lock expired, received %v", again)
	}
}

// Settlements are remembered for the lock duration (at least the receipt
// window), then forgotten; an idle engine frees them at its next deadline.
func TestSettlementsAreForgottenAfterTheWindow(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(time.Minute)})
	h.sendN(1)
	m := h.lock(1)[0]
	h.ok(settleWithID(mainQueue, m.GetLockToken(), complete, "c"))
	due, ok := h.e.NextDeadline()
	if want := h.now + time.Minute.Milliseconds(); !ok || due != want {
		t.Fatalf("next deadline %d (%v), want %d: when the settlement is forgotten", due, ok, want)
	}
	h.now = due - 1
	h.ok(settleWithID(mainQueue, m.GetLockToken(), complete, "c"))
	h.now = due
	h.ok(tickCmd())
	if n := len(h.e.settled.live()); n != 0 {
		t.Fatalf("%d settlements kept after the window", n)
	}
	h.fails(settleWithID(mainQueue, m.GetLockToken(), complete, "c"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
}

func TestOldestSettlementsAreForgottenBeyondTheBound(t *testing.T) {
	h := newHarness(t, nil)
	for i := range maxSettledKept + 1 {
		var tok lockToken
		tok[0], tok[1], tok[2] = byte(i), byte(i>>8), byte(i>>16)
		h.e.settled.add(settledLock{token: tok, path: testQueue, disposition: complete, expiresMs: h.now + 1000})
	}
	if n := len(h.e.settled.live()); n != maxSettledKept {
		t.Fatalf("%d settlements kept, want %d", n, maxSettledKept)
	}
	if _, ok := h.e.settled.byToken[lockToken{}]; ok {
		t.Fatal("the oldest settlement is still kept")
	}
	checkSettledInvariants(t, h.e)
}

// Entries written before settlements were remembered replay as they were
// applied then: the repeat finds the lock lost.
func TestSettlementsBeforeTheirVersionAreNotRemembered(t *testing.T) {
	h := newHarness(t, nil)
	h.version = ptr[uint32](versionSettlementsRepeatable - 1)
	h.sendN(1)
	m := h.lock(1)[0]
	h.ok(settleWithID(mainQueue, m.GetLockToken(), complete, "c"))
	h.fails(settleWithID(mainQueue, m.GetLockToken(), complete, "c"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	if n := len(h.e.settled.live()); n != 0 {
		t.Fatalf("%d settlements remembered", n)
	}
}

func TestSettlementsSurviveSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(3)
	got := h.lock(3)
	h.ok(settleWithID(mainQueue, got[0].GetLockToken(), complete, "a"))
	h.ok(settleWithID(mainQueue, got[1].GetLockToken(), deadLetterIt, "b"))
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New(0, 1)
	if err := restored.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest changed across the round trip")
	}
	h.e = restored
	h.ok(settleWithID(mainQueue, got[0].GetLockToken(), complete, "a"))
	h.ok(settleWithID(mainQueue, got[1].GetLockToken(), deadLetterIt, "b"))
	// The ids came through: another one is a second settlement.
	h.fails(settleWithID(mainQueue, got[0].GetLockToken(), complete, "b"), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	h.fails(settleWithID(mainQueue, got[1].GetLockToken(), deadLetterIt, ""), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	h.settle(got[2], complete)
}

// checkSettledInvariants verifies that the settlements kept are all live,
// in non-decreasing expiry order, indexed once each and within bounds.
func checkSettledInvariants(t testing.TB, e *Engine) {
	t.Helper()
	live := e.settled.live()
	for i, s := range live {
		if s.expiresMs <= e.now {
			t.Fatalf("settlement %x expired at %d, kept at %d", s.token[:], s.expiresMs, e.now)
		}
		if i > 0 && live[i-1].expiresMs > s.expiresMs {
			t.Fatalf("settlements out of expiry order at %d", i)
		}
		if pos, ok := e.settled.byToken[s.token]; !ok || pos != e.settled.base+e.settled.head+i {
			t.Fatalf("settlement %x indexed at %d (%v), kept at %d", s.token[:], pos, ok, e.settled.base+e.settled.head+i)
		}
	}
	if len(e.settled.byToken) != len(live) || len(live) > maxSettledKept {
		t.Fatalf("settlements: %d indexed, %d live (bound %d)", len(e.settled.byToken), len(live), maxSettledKept)
	}
}

func renewCmd(token []byte) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testQueue, LockToken: token}}}
}

// TestSettledTableFindsSettlementsAcrossCompactions: the table forgets
// its oldest settlements and moves the rest to the front of its storage
// many times over; every settlement kept is still found, and none
// forgotten is. Each settlement has a path of its own, so that one
// found at another's place in the table is not taken for it.
func TestSettledTableFindsSettlementsAcrossCompactions(t *testing.T) {
	table := newSettledTable()
	token := func(i int) lockToken {
		var tok lockToken
		binary.BigEndian.PutUint64(tok[:], uint64(i))
		return tok
	}
	path := strconv.Itoa
	found := func(path string, tok lockToken, now int64) bool {
		s, ok := table.find(tok, now)
		return ok && s.path == path
	}
	const n = 3*maxSettledKept + 100
	for i := range n {
		table.add(settledLock{token: token(i), path: path(i), expiresMs: int64(i)})
		if i%(maxSettledKept/3) == 0 || i == n-1 {
			for _, j := range []int{i, i - maxSettledKept + 1, i - maxSettledKept} {
				if j < 0 {
					continue
				}
				want := j > i-maxSettledKept
				if got := found(path(j), token(j), -1); got != want {
					t.Fatalf("after %d settlements, settlement %d found: %v, want %v", i+1, j, got, want)
				}
			}
		}
	}
	if len(table.byToken) != maxSettledKept || len(table.live()) != maxSettledKept {
		t.Fatalf("%d indexed, %d live, want %d", len(table.byToken), len(table.live()), maxSettledKept)
	}
	// Expiry forgets them all; the table starts over.
	table.prune(n)
	if len(table.byToken) != 0 || len(table.live()) != 0 {
		t.Fatalf("%d indexed, %d live after all expired", len(table.byToken), len(table.live()))
	}
	table.add(settledLock{token: token(n), path: path(n), expiresMs: n + 1})
	if !found(path(n), token(n), n) || found(path(n-1), token(n-1), n) {
		t.Fatal("after starting over, the new settlement is not found, or a forgotten one is")
	}
}

// BenchmarkSettledTableAtItsBound: what remembering one settlement costs
// once the table holds as many as it keeps (at one busy partition, from
// a few seconds after start).
func BenchmarkSettledTableAtItsBound(b *testing.B) {
	table := newSettledTable()
	var tok lockToken
	add := func(i int) {
		binary.BigEndian.PutUint64(tok[:], uint64(i)*0x9e3779b97f4a7c15)
		table.add(settledLock{token: tok, path: "q", expiresMs: int64(i)})
	}
	for i := range maxSettledKept {
		add(i)
	}
	b.ResetTimer()
	for i := range b.N {
		add(maxSettledKept + i)
	}
}
