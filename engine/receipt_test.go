package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// receiveWithID is a Lock of the test queue carrying a receive id.
func receiveWithID(id string, mode raftbusv1.ReceiveMode, n int32) *enginev1.Command {
	cmd := lockCmd(mainQueue, mode, n)
	cmd.GetLock().ReceiveId = []byte(id)
	return cmd
}

func tokensOf(ms []*raftbusv1.ReceivedMessage) [][]byte {
	var out [][]byte
	for _, m := range ms {
		out = append(out, m.GetLockToken())
	}
	return out
}

func TestRepeatedPeekLockReceiveReturnsTheSameMessagesWithoutCountingADelivery(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(5)
	first := h.ok(receiveWithID("r1", peekLock, 2)).GetLock().GetMessages()
	h.advance(time.Second)
	again := h.ok(receiveWithID("r1", peekLock, 2)).GetLock().GetMessages()
	if !slices.Equal(seqsOf(again), seqs[:2]) || !slices.EqualFunc(tokensOf(again), tokensOf(first), bytes.Equal) {
		t.Fatalf("repeat got %v %x, want the first receive's %v %x", seqsOf(again), tokensOf(again), seqsOf(first), tokensOf(first))
	}
	for _, m := range again {
		if m.GetDeliveryCount() != 1 || !m.GetLockedUntil().AsTime().Equal(first[0].GetLockedUntil().AsTime()) {
			t.Fatalf("repeat raised the delivery count or moved the lock: %v", m)
		}
	}
	if c := h.counts(); c.GetLockedMessageCount() != 2 {
		t.Fatalf("the repeat locked more messages: %v", c)
	}
	// A new receive id receives the next messages.
	if got := seqsOf(h.ok(receiveWithID("r2", peekLock, 10)).GetLock().GetMessages()); !slices.Equal(got, seqs[2:]) {
		t.Fatalf("a new receive got %v, want %v", got, seqs[2:])
	}
}

func TestRepeatedReceiveWhoseLocksEndedReportsThemLost(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(5 * time.Second)})
	seqs := h.sendN(3)
	h.ok(receiveWithID("r1", peekLock, 2))
	// The answer is lost; the repeat comes after the locks expired (within
	// the receipt's window): the first receive delivered two messages
	// nobody saw, which the repeat must say rather than answer "none".
	h.advance(5 * time.Second)
	e := h.fails(receiveWithID("r1", peekLock, 2), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	if !strings.Contains(e.GetMessage(), "locked 2 messages whose locks ended") {
		t.Fatalf("lock-lost message %q", e.GetMessage())
	}
	// The repeat changed nothing: the messages are available again with the
	// delivery the first receive counted.
	if c := h.counts(); c.GetActiveMessageCount() != 3 || c.GetLockedMessageCount() != 0 {
		t.Fatalf("counts after the repeat %v", c)
	}
	got := h.ok(receiveWithID("r2", peekLock, 3)).GetLock().GetMessages()
	if !slices.Equal(seqsOf(got), seqs) {
		t.Fatalf("a new receive got %v, want %v", seqsOf(got), seqs)
	}
	for i, want := range []int32{2, 2, 1} {
		if got[i].GetDeliveryCount() != want {
			t.Fatalf("message %d delivered with count %d, want %d", i, got[i].GetDeliveryCount(), want)
		}
	}
}

func TestRepeatedReceiveWithSomeLocksEndedReportsThemLost(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(3)
	first := h.ok(receiveWithID("r1", peekLock, 3)).GetLock().GetMessages()
	h.settle(first[0], complete)
	h.settle(first[2], abandon)
	h.fails(receiveWithID("r1", peekLock, 3), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	if c := h.counts(); c.GetLockedMessageCount() != 1 || c.GetActiveMessageCount() != 2 {
		t.Fatalf("counts after the repeat %v", c)
	}
}

func TestRepeatedReceiveAndDeleteReturnsTheRemovedMessages(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(4)
	first := h.ok(receiveWithID("r1", receiveDel, 2)).GetLock().GetMessages()
	again := h.ok(receiveWithID("r1", receiveDel, 2)).GetLock().GetMessages()
	if !slices.Equal(seqsOf(again), seqs[:2]) || !slices.Equal(ids(again), []string{"m0", "m1"}) {
		t.Fatalf("repeat got %v %v, want the removed %v", seqsOf(again), ids(again), seqs[:2])
	}
	for i := range again {
		if !proto.Equal(again[i], first[i]) {
			t.Fatalf("repeat gave\n%v\nthe first receive\n%v", again[i], first[i])
		}
	}
	// The answers do not share state: changing one leaves the receipt as it was.
	again[0].GetMessage().MessageId = "changed"
	if got := ids(h.ok(receiveWithID("r1", receiveDel, 2)).GetLock().GetMessages()); !slices.Equal(got, []string{"m0", "m1"}) {
		t.Fatalf("a caller's change reached the receipt: %v", got)
	}
	if c := h.counts(); c.GetActiveMessageCount() != 2 {
		t.Fatalf("the repeat removed more messages: %v", c)
	}
}

func TestReceiptsExpireWithTheLockDuration(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(45 * time.Second)})
	seqs := h.sendN(2)
	h.ok(receiveWithID("r1", receiveDel, 1))
	h.advance(45*time.Second - time.Millisecond)
	if got := seqsOf(h.ok(receiveWithID("r1", receiveDel, 1)).GetLock().GetMessages()); !slices.Equal(got, seqs[:1]) {
		t.Fatalf("within the window a repeat got %v", got)
	}
	h.advance(time.Millisecond)
	if got := seqsOf(h.ok(receiveWithID("r1", receiveDel, 1)).GetLock().GetMessages()); !slices.Equal(got, seqs[1:]) {
		t.Fatalf("after the window the id received %v, want the next message %v", got, seqs[1:])
	}
	if len(h.e.receipts.live()) != 1 {
		t.Fatalf("%d receipts kept, want the new one only", len(h.e.receipts.live()))
	}
}

func TestShortLockDurationsKeepReceiptsForTheMinimumWindow(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(time.Second)})
	h.sendN(2)
	h.ok(receiveWithID("r1", receiveDel, 1))
	h.advance(minReceiptWindow*time.Millisecond - time.Millisecond)
	if got := ids(h.ok(receiveWithID("r1", receiveDel, 1)).GetLock().GetMessages()); !slices.Equal(got, []string{"m0"}) {
		t.Fatalf("a repeat within the minimum window got %v", got)
	}
}

func TestReceiptSurvivesSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(4)
	locked := h.ok(receiveWithID("lock", peekLock, 2)).GetLock().GetMessages()
	removed := h.ok(receiveWithID("delete", receiveDel, 1)).GetLock().GetMessages()
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
	if got := h.ok(receiveWithID("lock", peekLock, 2)).GetLock().GetMessages(); !slices.EqualFunc(tokensOf(got), tokensOf(locked), bytes.Equal) {
		t.Fatalf("after restore the PeekLock repeat got %x, want %x", tokensOf(got), tokensOf(locked))
	}
	if got := h.ok(receiveWithID("delete", receiveDel, 1)).GetLock().GetMessages(); len(got) != 1 || !proto.Equal(got[0], removed[0]) {
		t.Fatalf("after restore the ReceiveAndDelete repeat got %v, want %v", got, removed)
	}
}

func TestRepeatedSessionReceive(t *testing.T) {
	h := newSessionHarness(t, nil)
	h.sendTo("s", "a", "b")
	s := h.accept("s")
	cmd := func(mode raftbusv1.ReceiveMode) *enginev1.Command {
		c := sessionLockCmd(s, mode, 1)
		c.GetLock().ReceiveId = []byte("r-" + mode.String())
		return c
	}
	first := h.ok(cmd(peekLock)).GetLock().GetMessages()
	again := h.ok(cmd(peekLock)).GetLock().GetMessages()
	if len(again) != 1 || !bytes.Equal(again[0].GetLockToken(), first[0].GetLockToken()) || again[0].GetDeliveryCount() != 1 {
		t.Fatalf("session repeat got %v, want %v", again, first)
	}
	h.settle(first[0], complete)
	removed := ids(h.ok(cmd(receiveDel)).GetLock().GetMessages())
	// The session is lost; a repeat of the ReceiveAndDelete still hands over
	// what it removed, a PeekLock repeat reports the lost session.
	h.ok(&enginev1.Command{Body: &enginev1.Command_ReleaseSession{ReleaseSession: &enginev1.ReleaseSession{EntityPath: testQueue, SessionId: s.id, LockToken: s.token}}})
	if got := ids(h.ok(cmd(receiveDel)).GetLock().GetMessages()); !slices.Equal(got, removed) || !slices.Equal(removed, []string{"b"}) {
		t.Fatalf("repeat after the session was released got %v, want %v", got, removed)
	}
	h.fails(cmd(peekLock), raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST)
}

func TestRepeatedReceiveDeferred(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(2)
	for _, m := range h.lock(2) {
		h.settle(m, deferIt)
	}
	cmd := func(mode raftbusv1.ReceiveMode) *enginev1.Command {
		return &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
			EntityPath: testQueue, ReceiveMode: mode, SequenceNumbers: seqs, ReceiveId: []byte("d-" + mode.String()),
		}}}
	}
	first := h.ok(cmd(peekLock)).GetReceiveDeferred().GetMessages()
	again := h.ok(cmd(peekLock)).GetReceiveDeferred().GetMessages()
	if !slices.EqualFunc(tokensOf(again), tokensOf(first), bytes.Equal) || len(again) != 2 {
		t.Fatalf("deferred repeat got %x, want %x", tokensOf(again), tokensOf(first))
	}
	for _, m := range first {
		h.settle(m, deferIt)
	}
	h.ok(cmd(receiveDel))
	if got := seqsOf(h.ok(cmd(receiveDel)).GetReceiveDeferred().GetMessages()); !slices.Equal(got, seqs) {
		t.Fatalf("ReceiveAndDelete deferred repeat got %v, want %v", got, seqs)
	}
}

func TestReplayReturnsTheReceiptOrFencesTheReceiveItStandsFor(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(3)
	replay := func(id string) *enginev1.Command {
		c := receiveWithID(id, peekLock, 5)
		c.GetLock().Replay = true
		return c
	}
	h.ok(receiveWithID("r1", peekLock, 1))
	if got := seqsOf(h.ok(replay("r1")).GetLock().GetMessages()); !slices.Equal(got, seqs[:1]) {
		t.Fatalf("replay of r1 got %v", got)
	}
	if got := h.ok(replay("r2")).GetLock().GetMessages(); len(got) != 0 {
		t.Fatalf("replay of an unknown id received %v", seqsOf(got))
	}
	// The receive r2 arrives after its replay: it receives nothing.
	if got := h.ok(receiveWithID("r2", peekLock, 5)).GetLock().GetMessages(); len(got) != 0 {
		t.Fatalf("a receive fenced by its replay received %v", seqsOf(got))
	}
	if c := h.counts(); c.GetLockedMessageCount() != 1 {
		t.Fatalf("counts %v", c)
	}
	h.fails(&enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: testQueue, Replay: true}}},
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

func TestReceiveIDReusedForAnotherReceiveIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(2)
	h.ok(receiveWithID("r1", peekLock, 1))
	h.fails(receiveWithID("r1", receiveDel, 1), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	dlq := receiveWithID("r1", peekLock, 1)
	dlq.GetLock().SubQueue = deadLetter
	h.fails(dlq, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	h.fails(receiveWithID(string(make([]byte, maxReceiveIDSize+1)), peekLock, 1), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	if c := h.counts(); c.GetLockedMessageCount() != 1 {
		t.Fatalf("a refused receive changed the state: %v", c)
	}
}

func TestOldestReceiptsAreForgottenBeyondTheBounds(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{MaxSizeInMegabytes: ptr[int64](1024), MaxMessageSizeInKilobytes: ptr[int64](4096)})
	body := make([]byte, 3<<20)
	n := maxReceiptBytes/len(body) + 2
	for i := range n {
		h.send(&raftbusv1.Message{MessageId: fmt.Sprint(i), Body: body})
	}
	for i := range n {
		h.ok(receiveWithID(fmt.Sprint("r", i), receiveDel, 1))
	}
	if got := len(h.e.receipts.live()); got >= n || h.e.receipts.bytes > maxReceiptBytes {
		t.Fatalf("%d receipts of %d kept, %d bytes", got, n, h.e.receipts.bytes)
	}
	// The newest are kept, the oldest forgotten.
	if got := ids(h.ok(receiveWithID(fmt.Sprint("r", n-1), receiveDel, 1)).GetLock().GetMessages()); !slices.Equal(got, []string{fmt.Sprint(n - 1)}) {
		t.Fatalf("the newest receipt answered %v", got)
	}
	if h.e.HasReceipt(testQueue, []byte("r0")) {
		t.Fatal("the oldest receipt is still kept")
	}
}

func TestIdleEngineFreesReceiptsAtTheNextDeadline(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(time.Minute)})
	h.sendN(2)
	h.ok(receiveWithID("r1", receiveDel, 1))
	h.advance(time.Second)
	h.ok(receiveWithID("r2", receiveDel, 1))
	due, ok := h.e.NextDeadline()
	if want := h.now + time.Minute.Milliseconds(); !ok || due != want {
		t.Fatalf("next deadline %d (%v), want %d: when the newest receipt ends", due, ok, want)
	}
	h.now = due
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	if n := len(h.e.receipts.live()); n != 0 || h.e.receipts.bytes != 0 {
		t.Fatalf("%d receipts (%d bytes) kept after the Tick", n, h.e.receipts.bytes)
	}
	if _, ok := h.e.NextDeadline(); ok {
		t.Fatal("a deadline is left with nothing to do")
	}
}
