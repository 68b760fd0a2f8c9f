package engine

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	sessionLockLost       = raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST
	sessionCannotBeLocked = raftbusv1.ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED
	invalidArgument       = raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT
)

func TestSessionEntityRejectsReceiveWithoutSession(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("s", "m0")
	e := h.fails(lockCmd(mainQueue, peekLock, 1), invalidArgument)
	if e.GetMessage() == "" {
		t.Fatal("no message")
	}
	h.fails(&enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, SequenceNumbers: []int64{1},
	}}}, invalidArgument)
}

func TestEntityWithoutSessionsIgnoresSessionIDForLocking(t *testing.T) {
	h := newHarness(t, nil)
	h.sendTo("a", "a0", "a1")
	h.sendTo("b", "b0")
	if got := ids(h.lock(10)); !slices.Equal(got, []string{"a0", "a1", "b0"}) {
		t.Fatalf("locked %v", got)
	}
	h.fails(acceptCmd("a"), invalidArgument)
	h.fails(sessionLockCmd(heldSessionLock{"a", make([]byte, 16)}, peekLock, 1), invalidArgument)
	if got := ids(mustPeekSession(t, h, "a")); !slices.Equal(got, []string{"a0", "a1"}) {
		t.Fatalf("peeked session a: %v", got)
	}
}

func TestAcceptSessionByIDLocksSessionWithoutMessages(t *testing.T) {
	h := newSessionHarness(t, nil)
	r := h.ok(acceptCmd("empty")).GetAcceptSession()
	if r.GetSessionId() != "empty" || len(r.GetLockToken()) != 16 || timestampMs(r.GetLockedUntil()) != h.now+30_000 {
		t.Fatalf("accepted %v", r)
	}
	s := heldSessionLock{r.GetSessionId(), r.GetLockToken()}
	if got := h.receiveIn(s, 1); len(got) != 0 {
		t.Fatalf("received %v from an empty session", ids(got))
	}
	h.sendTo("empty", "m0")
	if got := ids(h.receiveIn(s, 1)); !slices.Equal(got, []string{"m0"}) {
		t.Fatalf("received %v", got)
	}
}

func TestAcceptNextSessionTakesOldestAvailableUnheldSession(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("b", "b0")
	h.sendTo("a", "a0")
	h.sendTo("c", "c0")
	h.sendTo("b", "b1")
	held := h.accept("b")
	if got := h.accept(""); got.id != "a" {
		t.Fatalf("accepted %q, want a (b is held)", got.id)
	}
	// Release b: its oldest message is older than c's.
	h.ok(releaseCmd(held))
	if got := h.accept(""); got.id != "b" {
		t.Fatalf("accepted %q, want b", got.id)
	}
	if got := h.accept(""); got.id != "c" {
		t.Fatalf("accepted %q, want c", got.id)
	}
}

func TestAcceptNextSessionGetsNoneWhenNoneIsAvailable(t *testing.T) {
	h := newSessionHarness(t, nil)
	if got := h.accept(""); got.id != "" || got.token != nil {
		t.Fatalf("accepted %v from an empty entity", got)
	}
	h.sendTo("a", "a0")
	s := h.accept("")
	// Its only message is locked: the session is held anyway.
	h.receiveIn(s, 1)
	h.ok(releaseCmd(s)) // the message is available again, the session free
	if got := h.accept(""); got.id != "a" {
		t.Fatalf("accepted %q after release", got.id)
	}
	if got := h.accept(""); got.id != "" {
		t.Fatalf("accepted %q while every session is held", got.id)
	}
}

func TestAcceptHeldSessionFailsWithSessionCannotBeLocked(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	h.accept("a")
	e := h.fails(acceptCmd("a"), sessionCannotBeLocked)
	if e.GetMessage() == "" {
		t.Fatal("no message")
	}
}

func TestSessionMessagesGoOnlyToHolderInSequenceOrder(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	h.sendTo("b", "b0")
	h.sendTo("a", "a1", "a2")
	a := h.accept("a")
	ms := h.receiveIn(a, 10)
	if got := ids(ms); !slices.Equal(got, []string{"a0", "a1", "a2"}) {
		t.Fatalf("received %v", got)
	}
	for _, m := range ms {
		h.ok(sessionSettleCmd(a, m.GetLockToken(), complete))
	}
	// A receiver with another session's token gets nothing of a.
	b := h.accept("b")
	h.fails(sessionLockCmd(heldSessionLock{"a", b.token}, peekLock, 1), sessionLockLost)
}

// Entries written before versionSessionLocksCoverMessages replay as they
// were applied: one locked message per session at a time.
func TestEntriesBeforeVersion2LockOneSessionMessageAtATime(t *testing.T) {
	for _, d := range []enginev1.Disposition{complete, deadLetterIt, deferIt} {
		t.Run(d.String(), func(t *testing.T) {
			h := newSessionHarness(t, nil)
			h.version = ptr[uint32](versionSessionLocksCoverMessages - 1)
			h.sendTo("a", "a0", "a1")
			s := h.accept("a")
			first := h.receiveIn(s, 1)
			if got := h.receiveIn(s, 1); len(got) != 0 {
				t.Fatalf("received %v while a0 is locked", ids(got))
			}
			if got := h.ok(sessionLockCmd(s, receiveDel, 5)).GetLock().GetMessages(); len(got) != 0 {
				t.Fatalf("received and deleted %v while a0 is locked", ids(got))
			}
			h.ok(sessionSettleCmd(s, first[0].GetLockToken(), d))
			if got := ids(h.receiveIn(s, 1)); !slices.Equal(got, []string{"a1"}) {
				t.Fatalf("received %v after settling a0", got)
			}
		})
	}
}

func TestReceiveAndDeleteInSessionTakesMessagesInOrder(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0", "a1", "a2")
	s := h.accept("a")
	got := h.ok(sessionLockCmd(s, receiveDel, 2)).GetLock().GetMessages()
	if !slices.Equal(ids(got), []string{"a0", "a1"}) {
		t.Fatalf("received %v", ids(got))
	}
	if c := h.counts(); c.GetActiveMessageCount() != 1 {
		t.Fatalf("counts %v", c)
	}
}

func TestAbandonPutsMessageBackAtHeadOfSession(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0", "a1")
	s := h.accept("a")
	m := h.receiveIn(s, 1)
	h.ok(sessionSettleCmd(s, m[0].GetLockToken(), abandon))
	again := h.receiveIn(s, 1)
	if got := ids(again); !slices.Equal(got, []string{"a0"}) || again[0].GetDeliveryCount() != 2 {
		t.Fatalf("received %v (delivery count %d) after abandon", got, again[0].GetDeliveryCount())
	}
}

func TestSessionLockExpiryReleasesMessageLocks(t *testing.T) {
	h := newSessionHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second), MaxDeliveryCount: ptr[int32](2)})
	h.sendTo("a", "a0", "a1")
	for delivery := int32(1); delivery <= 2; delivery++ {
		s := h.accept("a")
		h.advance(6 * time.Second)
		m := h.receiveIn(s, 1)
		if m[0].GetDeliveryCount() != delivery || m[0].GetMessage().GetMessageId() != "a0" {
			t.Fatalf("delivery %d: received %v count %d", delivery, ids(m), m[0].GetDeliveryCount())
		}
		// Locked under the session's lock: it ends with the session's.
		if at, ok := h.e.NextDeadline(); !ok || at != h.now+4000 || timestampMs(m[0].GetLockedUntil()) != at {
			t.Fatalf("next deadline %d %v, locked until %v, want the session lock expiry %d", at, ok, m[0].GetLockedUntil(), h.now+4000)
		}
		h.advance(4 * time.Second)
		h.fails(sessionSettleCmd(s, m[0].GetLockToken(), complete), sessionLockLost)
		want := sessionLockLost
		if delivery == 2 { // dead-lettered: the message left the queue
			want = raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST
		}
		h.fails(settleCmd(mainQueue, m[0].GetLockToken(), complete), want)
	}
	// The second release used up a0's deliveries: it was dead-lettered.
	if dl := h.peek(deadLetter, 0, 10); !slices.Equal(ids(dl), []string{"a0"}) || dl[0].GetDeadLetterReason() != reasonMaxDeliveryCountExceeded {
		t.Fatalf("dead letters %v", dl)
	}
	s := h.accept("a")
	if got := ids(h.receiveIn(s, 1)); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("received %v", got)
	}
}

func TestReleaseSessionReleasesMessageLocks(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	s := h.accept("a")
	m := h.receiveIn(s, 1)
	h.ok(releaseCmd(s))
	if c := h.counts(); c.GetLockedMessageCount() != 0 {
		t.Fatalf("counts %v", c)
	}
	h.fails(releaseCmd(s), sessionLockLost)
	s = h.accept("a")
	again := h.receiveIn(s, 1)
	if again[0].GetSequenceNumber() != m[0].GetSequenceNumber() || again[0].GetDeliveryCount() != 2 {
		t.Fatalf("received %v count %d", ids(again), again[0].GetDeliveryCount())
	}
}

func TestSettleAfterSessionLossFailsWithSessionLockLost(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	s := h.accept("a")
	m := h.receiveIn(s, 1)
	h.ok(releaseCmd(s))
	renew := &enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testQueue, LockToken: m[0].GetLockToken()}}}
	for _, cmd := range []*enginev1.Command{settleCmd(mainQueue, m[0].GetLockToken(), complete), renew} {
		if e := h.fails(cmd, sessionLockLost); e.GetMessage() == "" {
			t.Fatal("no message")
		}
	}
	// Once the message is locked again, the old token is just unknown.
	s = h.accept("a")
	h.receiveIn(s, 1)
	h.fails(settleCmd(mainQueue, m[0].GetLockToken(), complete), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
}

func TestRenewSessionLockExtendsIt(t *testing.T) {
	h := newSessionHarness(t, nil)
	s := h.accept("a")
	h.advance(20 * time.Second)
	r := h.ok(renewSessionCmd(s)).GetRenewSessionLock()
	if timestampMs(r.GetLockedUntil()) != h.now+30_000 {
		t.Fatalf("locked until %v", r.GetLockedUntil())
	}
	h.advance(20 * time.Second) // 40 s after accepting, 20 s after renewing
	h.ok(setStateCmd(s, []byte("x")))
	h.advance(10 * time.Second)
	h.fails(renewSessionCmd(s), sessionLockLost)
	h.accept("a")
}

func TestOperationsWithLostSessionLockFailWithSessionLockLost(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	s := h.accept("a")
	m := h.receiveIn(s, 1)
	h.ok(sessionSettleCmd(s, m[0].GetLockToken(), deferIt))
	h.ok(releaseCmd(s))
	cmds := map[string]*enginev1.Command{
		"receive":           sessionLockCmd(s, peekLock, 1),
		"settle":            sessionSettleCmd(s, m[0].GetLockToken(), complete),
		"renew message":     {Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testQueue, LockToken: m[0].GetLockToken(), SessionId: s.id, SessionLockToken: s.token}}},
		"receive deferred":  {Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{EntityPath: testQueue, SequenceNumbers: seqsOf(m), SessionId: s.id, SessionLockToken: s.token}}},
		"renew session":     renewSessionCmd(s),
		"set state":         setStateCmd(s, []byte("x")),
		"release":           releaseCmd(s),
		"unknown session":   releaseCmd(heldSessionLock{"nobody", s.token}),
		"another's session": releaseCmd(heldSessionLock{"a", make([]byte, 16)}),
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range cmds {
			if !yield(k) {
				return
			}
		}
	}) {
		before := h.e.Digest()
		h.fails(cmds[name], sessionLockLost)
		if h.e.Digest() != before {
			t.Fatalf("%s: the failed command changed the state", name)
		}
	}
	if _, err := h.e.GetSessionState(testQueue, s.id, s.token, h.now); err == nil || err.(*Error).Reason != sessionLockLost {
		t.Fatalf("GetSessionState: %v", err)
	}
}

func TestReceiveDeferredUnderSessionFindsOnlyThatSession(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	h.sendTo("b", "b0")
	a, b := h.accept("a"), h.accept("b")
	ma, mb := h.receiveIn(a, 1), h.receiveIn(b, 1)
	h.ok(sessionSettleCmd(a, ma[0].GetLockToken(), deferIt))
	h.ok(sessionSettleCmd(b, mb[0].GetLockToken(), deferIt))
	deferred := func(s heldSessionLock, seqs []int64) *enginev1.Command {
		return &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
			EntityPath: testQueue, SequenceNumbers: seqs, SessionId: s.id, SessionLockToken: s.token,
		}}}
	}
	h.fails(deferred(a, seqsOf(mb)), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	got := h.ok(deferred(a, seqsOf(ma))).GetReceiveDeferred().GetMessages()
	if !slices.Equal(ids(got), []string{"a0"}) {
		t.Fatalf("received %v", ids(got))
	}
	// Settling b's message under a's session fails.
	gotB := h.ok(deferred(b, seqsOf(mb))).GetReceiveDeferred().GetMessages()
	h.fails(sessionSettleCmd(a, gotB[0].GetLockToken(), complete), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	h.ok(sessionSettleCmd(b, gotB[0].GetLockToken(), complete))
}

func TestSessionStateIsKeptAfterMessagesAreGoneUntilSetEmpty(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	s := h.accept("a")
	if st, err := h.e.GetSessionState(testQueue, "a", s.token, h.now); err != nil || st != nil {
		t.Fatalf("state %q %v before it was set", st, err)
	}
	h.ok(setStateCmd(s, []byte("step 1")))
	m := h.receiveIn(s, 1)
	h.ok(sessionSettleCmd(s, m[0].GetLockToken(), complete))
	h.ok(releaseCmd(s))
	if c := h.counts(); c.GetSessionCount() != 0 {
		t.Fatalf("session count %d with no messages", c.GetSessionCount())
	}
	s = h.accept("a")
	if st, err := h.e.GetSessionState(testQueue, "a", s.token, h.now); err != nil || string(st) != "step 1" {
		t.Fatalf("state %q %v", st, err)
	}
	h.ok(setStateCmd(s, nil))
	h.ok(releaseCmd(s))
	if n := len(h.e.entities[testQueue].main.sessions.byID); n != 0 {
		t.Fatalf("%d sessions remembered after the state was cleared", n)
	}
}

func TestSessionStateOverLimitFailsWithMessageSizeExceeded(t *testing.T) {
	h := newSessionHarness(t, nil)
	s := h.accept("a")
	h.ok(setStateCmd(s, []byte("kept")))
	e := h.fails(setStateCmd(s, make([]byte, MaxSessionStateBytes+1)), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED)
	if e.GetMessage() == "" {
		t.Fatal("no message")
	}
	h.ok(setStateCmd(s, make([]byte, MaxSessionStateBytes)))
	h.ok(setStateCmd(s, []byte("kept")))
	if st, _ := h.e.GetSessionState(testQueue, "a", s.token, h.now); string(st) != "kept" {
		t.Fatalf("state %q", st)
	}
}

func TestSessionStateIsForTheHolderOnly(t *testing.T) {
	h := newSessionHarness(t, nil)
	s := h.accept("a")
	h.ok(setStateCmd(s, []byte("mine")))
	other := heldSessionLock{"a", bytes.Repeat([]byte{1}, 16)}
	h.fails(setStateCmd(other, []byte("theirs")), sessionLockLost)
	for _, tok := range [][]byte{other.token, nil, s.token[:8]} {
		if _, err := h.e.GetSessionState(testQueue, "a", tok, h.now); err == nil || err.(*Error).Reason != sessionLockLost {
			t.Fatalf("read the state with token %x: %v", tok, err)
		}
	}
}

func TestMissingSessionIDOnSessionEntityIsInvalidArgument(t *testing.T) {
	h := newSessionHarness(t, nil)
	e := h.fails(sendCmd(&raftbusv1.Message{MessageId: "m"}), invalidArgument)
	if e.GetMessage() == "" {
		t.Fatal("no message")
	}
	h.fails(acceptCmd(string(make([]byte, maxSessionIDLength+1))), invalidArgument)
	h.fails(setStateCmd(heldSessionLock{"", make([]byte, 16)}, nil), invalidArgument)
	h.fails(sessionLockCmd(heldSessionLock{"a", nil}, peekLock, 1), invalidArgument)
}

func TestRequiresSessionCannotBeChanged(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.fails(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue}}}, invalidArgument)
}

func mustPeekSession(t *testing.T, h *harness, id string) []*raftbusv1.ReceivedMessage {
	t.Helper()
	ms, err := h.e.PeekSession(testQueue, id, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestPeekSessionShowsOnlyThatSession(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0")
	h.sendTo("b", "b0")
	h.sendTo("a", "a1")
	h.send(&raftbusv1.Message{MessageId: "a2", SessionId: "a", ScheduledEnqueueTime: timestamp(h.now + 60_000)})
	s := h.accept("a")
	h.receiveIn(s, 1)
	got := mustPeekSession(t, h, "a")
	if !slices.Equal(ids(got), []string{"a0", "a1", "a2"}) || got[0].GetLockToken() != nil {
		t.Fatalf("peeked %v", got)
	}
	from, err := h.e.PeekSession(testQueue, "a", got[1].GetSequenceNumber(), 1, 0)
	if err != nil || !slices.Equal(ids(from), []string{"a1"}) {
		t.Fatalf("peeked %v %v from a1", ids(from), err)
	}
	if got := mustPeekSession(t, h, "nobody"); len(got) != 0 {
		t.Fatalf("peeked %v", ids(got))
	}
}

func TestRuntimeCountsSessionsWithMessages(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("a", "a0", "a1")
	h.sendTo("b", "b0")
	h.accept("empty")
	if c := h.counts(); c.GetSessionCount() != 2 {
		t.Fatalf("session count %d, want 2", c.GetSessionCount())
	}
	b := h.accept("b")
	m := h.receiveIn(b, 1)
	h.ok(sessionSettleCmd(b, m[0].GetLockToken(), complete))
	if c := h.counts(); c.GetSessionCount() != 1 {
		t.Fatalf("session count %d, want 1", c.GetSessionCount())
	}
}

func TestHasAvailableSessionAndInSession(t *testing.T) {
	h := newSessionHarness(t, nil)
	if h.e.HasAvailableSession(testQueue) || h.e.HasAvailableInSession(testQueue, "a") {
		t.Fatal("available in an empty entity")
	}
	h.sendTo("a", "a0")
	if !h.e.HasAvailableSession(testQueue) || !h.e.HasAvailableInSession(testQueue, "a") {
		t.Fatal("not available after a send")
	}
	s := h.accept("")
	if h.e.HasAvailableSession(testQueue) {
		t.Fatal("a session is available while the only one is held")
	}
	if !h.e.HasAvailableInSession(testQueue, s.id) {
		t.Fatal("nothing available in the held session")
	}
	h.receiveIn(s, 1)
	if h.e.HasAvailableInSession(testQueue, s.id) {
		t.Fatal("available while its message is locked")
	}
	if h.e.HasAvailableSession("nowhere") || h.e.HasAvailableInSession("nowhere", "a") {
		t.Fatal("available in an unknown entity")
	}
}

func TestSessionsSurviveSnapshotRoundTrip(t *testing.T) {
	h := newSessionHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second)})
	h.sendTo("a", "a0", "a1")
	h.sendTo("b", "b0")
	a := h.accept("a")
	h.ok(setStateCmd(a, []byte("state a")))
	m := h.receiveIn(a, 1)
	s := h.accept("stateful")
	h.ok(setStateCmd(s, []byte("kept")))
	h.ok(releaseCmd(s))
	h.sendTo("d", "d0")
	d := h.accept("d")
	md := h.receiveIn(d, 1)
	h.ok(releaseCmd(d)) // md's token is now a lost session lock's

	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New(0, 1)
	if err := restored.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, restored)
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest changed across the round trip")
	}
	if st, err := restored.GetSessionState(testQueue, "a", a.token, h.now); err != nil || string(st) != "state a" {
		t.Fatalf("state %q %v", st, err)
	}
	if p, _ := restored.RuntimeProperties(testQueue); p.GetSessionCount() != 3 {
		t.Fatalf("session count %d", p.GetSessionCount())
	}
	// Both engines go on identically: the session lock expires, releasing a0.
	h.advance(11 * time.Second)
	for _, cmd := range []*enginev1.Command{
		sessionSettleCmd(a, m[0].GetLockToken(), complete),
		settleCmd(mainQueue, md[0].GetLockToken(), complete),
		acceptCmd(""), acceptCmd(""), acceptCmd(""), acceptCmd("stateful"),
	} {
		cmd.NowUnixMs, cmd.TokenSeed = h.now, h.seed()
		want, got := h.e.Apply(cmd), restored.Apply(cmd)
		if !proto.Equal(want, got) {
			t.Fatalf("%T: restored gave %v, want %v", cmd.GetBody(), got, want)
		}
	}
	if restored.Digest() != h.e.Digest() {
		t.Fatal("the engines diverged after the round trip")
	}
}

func TestSessionOnlyMetaIsTheProtobufEncoding(t *testing.T) {
	for _, id := range []string{"s", "session-0001", string(bytes.Repeat([]byte("é"), maxSessionIDLength))} {
		want, err := deterministic.Marshal(&raftbusv1.Message{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionOnlyMeta(id); !bytes.Equal(got, want) {
			t.Fatalf("%q: encoded %x, want %x", id, got, want)
		}
		if got, ok := sessionOnlyID(want); !ok || got != id {
			t.Fatalf("%q: decoded %q %v", id, got, ok)
		}
	}
	other, _ := deterministic.Marshal(&raftbusv1.Message{SessionId: "s", Subject: "x"})
	if _, ok := sessionOnlyID(other); ok {
		t.Fatal("decoded a meta with more than a session id")
	}
}

func TestSessionStateIsRefusedOnceTheLockExpiredEvenBeforeAnyCommand(t *testing.T) {
	h := newSessionHarness(t, nil)
	s := h.accept("a")
	h.ok(setStateCmd(s, []byte("mine")))
	st, err := h.e.GetSessionState(testQueue, "a", s.token, h.now)
	if err != nil || string(st) != "mine" {
		t.Fatalf("state %q %v while held", st, err)
	}
	st[0] = 'X' // the caller's copy, not the engine's
	h.advance(31 * time.Second)
	if _, err := h.e.GetSessionState(testQueue, "a", s.token, h.now); err == nil || err.(*Error).Reason != sessionLockLost {
		t.Fatalf("read after the lock expired: %v, want SESSION_LOCK_LOST", err)
	}
	t2 := h.accept("a")
	if st, _ := h.e.GetSessionState(testQueue, "a", t2.token, h.now); string(st) != "mine" {
		t.Fatalf("state %q: a caller's change to its copy reached the engine", st)
	}
}
