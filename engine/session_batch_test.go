package engine

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Service Bus hands a session's messages out in order, several per
// receive, and the session lock covers the messages received under it.

func renewLockCmd(token []byte) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testQueue, LockToken: token}}}
}

func TestSessionReceiveHandsOutSeveralMessagesInOrder(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0", "a1")
	h.sendTo("b", "b0")
	h.sendTo("a", "a2", "a3", "a4")
	a := h.accept("a")
	first := h.receiveIn(a, 3)
	if got := ids(first); !slices.Equal(got, []string{"a0", "a1", "a2"}) {
		t.Fatalf("first receive %v", got)
	}
	if !h.e.HasAvailableInSession(testQueue, "a") {
		t.Fatal("HasAvailableInSession says no while a3 is available")
	}
	rest := h.receiveIn(a, 10)
	if got := ids(rest); !slices.Equal(got, []string{"a3", "a4"}) {
		t.Fatalf("second receive %v", got)
	}
	if got := h.receiveIn(a, 10); len(got) != 0 || h.e.HasAvailableInSession(testQueue, "a") {
		t.Fatalf("received %v with every message of the session locked", ids(got))
	}
	if c := h.counts(); c.GetLockedMessageCount() != 5 || c.GetActiveMessageCount() != 6 {
		t.Fatalf("counts %v", c)
	}
	for _, m := range append(first, rest...) {
		h.ok(sessionSettleCmd(a, m.GetLockToken(), complete))
	}
	if c := h.counts(); c.GetActiveMessageCount() != 1 || c.GetSessionCount() != 1 {
		t.Fatalf("counts after completing session a %v", c)
	}
}

func TestAbandonedSessionMessageComesBackBeforeLaterOnes(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0", "a1", "a2", "a3")
	s := h.accept("a")
	ms := h.receiveIn(s, 3)
	h.ok(sessionSettleCmd(s, ms[1].GetLockToken(), abandon))
	again := h.receiveIn(s, 2)
	if got := ids(again); !slices.Equal(got, []string{"a1", "a3"}) || again[0].GetDeliveryCount() != 2 {
		t.Fatalf("after abandoning a1: %v", again)
	}
}

func TestMessagesLockedUnderASessionLastAsLongAsItsLock(t *testing.T) {
	h := newSessionHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second)})
	h.sendTo("a", "a0", "a1", "a2", "a3", "a4")
	s := h.accept("a")
	ms := h.receiveIn(s, 5)
	for _, m := range ms {
		if timestampMs(m.GetLockedUntil()) != h.now+10_000 {
			t.Fatalf("%s locked until %v, want the session's", m.GetMessage().GetMessageId(), m.GetLockedUntil())
		}
	}
	// A slow handler: three lock durations, the session lock renewed.
	for range 6 {
		h.advance(5 * time.Second)
		h.ok(renewSessionCmd(s))
	}
	if at, ok := h.e.NextDeadline(); !ok || at != h.now+10_000 {
		t.Fatalf("next deadline %d %v, want the session lock's %d", at, ok, h.now+10_000)
	}
	if c := h.counts(); c.GetLockedMessageCount() != 5 {
		t.Fatalf("counts %v", c)
	}
	// Seen again (a repeat of the receive would show it), a message is
	// locked until the session is.
	if p := h.ok(sessionLockCmd(s, peekLock, 1)); len(p.GetLock().GetMessages()) != 0 {
		t.Fatalf("received %v with every message locked", p)
	}
	for _, m := range ms {
		h.ok(sessionSettleCmd(s, m.GetLockToken(), complete))
	}
	if c := h.counts(); c.GetActiveMessageCount() != 0 {
		t.Fatalf("counts %v", c)
	}
}

func TestRenewingAMessageLockUnderASessionRenewsTheSessionLock(t *testing.T) {
	h := newSessionHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second)})
	h.sendTo("a", "a0", "a1")
	s := h.accept("a")
	ms := h.receiveIn(s, 2)
	h.advance(8 * time.Second)
	r := h.ok(renewLockCmd(ms[0].GetLockToken())).GetRenewLock()
	if timestampMs(r.GetLockedUntil()) != h.now+10_000 {
		t.Fatalf("renewed until %v", r.GetLockedUntil())
	}
	h.advance(8 * time.Second) // past the first session lock's expiry
	if _, err := h.e.GetSessionState(testQueue, s.id, s.token, h.now); err != nil {
		t.Fatalf("the session lock was not renewed: %v", err)
	}
	h.ok(sessionSettleCmd(s, ms[1].GetLockToken(), complete))
	h.ok(sessionSettleCmd(s, ms[0].GetLockToken(), complete))
}

func TestSettlingAfterTheSessionLockEndedFailsWithSessionLockLost(t *testing.T) {
	for _, end := range []struct {
		name string
		do   func(h *harness, s heldSessionLock)
	}{
		{"expired", func(h *harness, s heldSessionLock) { h.advance(30 * time.Second) }},
		{"released", func(h *harness, s heldSessionLock) { h.ok(releaseCmd(s)) }},
	} {
		t.Run(end.name, func(t *testing.T) {
			h := newSessionHarness(t, nil)
			h.sendTo("a", "a0", "a1", "a2")
			s := h.accept("a")
			ms := h.receiveIn(s, 3)
			h.advance(20 * time.Second)
			end.do(h, s)
			for _, m := range ms {
				h.fails(sessionSettleCmd(s, m.GetLockToken(), complete), sessionLockLost)
				h.fails(settleCmd(mainQueue, m.GetLockToken(), complete), sessionLockLost)
				h.fails(renewLockCmd(m.GetLockToken()), sessionLockLost)
			}
			next := h.accept("a")
			again := h.receiveIn(next, 10)
			if got := ids(again); !slices.Equal(got, []string{"a0", "a1", "a2"}) || again[2].GetDeliveryCount() != 2 {
				t.Fatalf("the next holder received %v", again)
			}
		})
	}
}

func TestDeferredMessagesReceivedUnderASessionShareItsLock(t *testing.T) {
	h := newSessionHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second)})
	h.sendTo("a", "a0", "a1")
	s := h.accept("a")
	ms := h.receiveIn(s, 2)
	h.ok(sessionSettleCmd(s, ms[0].GetLockToken(), deferIt))
	got := h.ok(&enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, SequenceNumbers: seqsOf(ms[:1]), SessionId: s.id, SessionLockToken: s.token,
	}}}).GetReceiveDeferred().GetMessages()
	if len(got) != 1 || timestampMs(got[0].GetLockedUntil()) != h.now+10_000 {
		t.Fatalf("received deferred %v", got)
	}
	for range 4 {
		h.advance(5 * time.Second)
		h.ok(renewSessionCmd(s))
	}
	h.ok(sessionSettleCmd(s, got[0].GetLockToken(), complete))
	h.ok(sessionSettleCmd(s, ms[1].GetLockToken(), complete))
}

func TestRestoreRefusesSessionLocksOutOfPlace(t *testing.T) {
	for name, damage := range map[string]func(recs []*enginev1.SnapshotRecord) []*enginev1.SnapshotRecord{
		"session nobody holds": func(recs []*enginev1.SnapshotRecord) []*enginev1.SnapshotRecord {
			return slices.DeleteFunc(recs, func(r *enginev1.SnapshotRecord) bool { return r.GetSession() != nil })
		},
		"lock beyond the session's": func(recs []*enginev1.SnapshotRecord) []*enginev1.SnapshotRecord {
			for _, r := range recs {
				if m := r.GetMessage(); m.GetUnderSessionLock() {
					m.DueUnixMs++
				}
			}
			return recs
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newSessionHarness(t, nil)
			h.sendTo("a", "a0")
			h.receiveIn(h.accept("a"), 1)
			var buf bytes.Buffer
			if err := h.e.Snapshot(&buf); err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			for _, r := range damage(readRecords(t, buf.Bytes())) {
				if _, err := protodelim.MarshalTo(&w, r); err != nil {
					t.Fatal(err)
				}
			}
			if err := New(0, 1).Restore(&w); err == nil {
				t.Fatal("a damaged snapshot was restored")
			}
		})
	}
}

// Entries written before versionSessionLocksCoverMessages replay as they
// were applied: a session message's lock expired on its own, even while
// the session lock was renewed.
func TestEntriesBeforeVersion2GiveSessionMessagesTheirOwnLock(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.version = ptr[uint32](versionSessionLocksCoverMessages - 1)
	h.sendTo("a", "a0")
	s := h.accept("a")
	m := h.receiveIn(s, 1)
	h.advance(20 * time.Second)
	h.ok(renewSessionCmd(s))
	h.advance(15 * time.Second)
	h.fails(sessionSettleCmd(s, m[0].GetLockToken(), complete), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	// A leader of this build locks the message again, under the session.
	h.version = nil
	h.ok(renewSessionCmd(s))
	again := h.receiveIn(s, 1)
	if len(again) != 1 || again[0].GetDeliveryCount() != 2 {
		t.Fatalf("received %v", again)
	}
	h.advance(20 * time.Second)
	h.ok(renewSessionCmd(s))
	h.advance(15 * time.Second)
	h.ok(sessionSettleCmd(s, again[0].GetLockToken(), complete))
}
