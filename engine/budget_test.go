package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const bodySize = 100_000

// sendBodies sends n messages of bodySize bytes with ids m0, m1, ... and
// returns their sequence numbers.
func (h *harness) sendBodies(n int) []int64 {
	h.t.Helper()
	var seqs []int64
	for i := range n {
		r := h.send(&raftbusv1.Message{MessageId: "m" + string(rune('0'+i)), Body: make([]byte, bodySize)})
		seqs = append(seqs, r[0].GetSequenceNumber())
	}
	return seqs
}

// answerSize is the encoded size of msgs as an answer carries them.
func answerSize(msgs []*raftbusv1.ReceivedMessage) int {
	return proto.Size(&raftbusv1.ReceiveResponse{Messages: msgs})
}

func budgetedLock(mode raftbusv1.ReceiveMode, n int32, maxBytes int64) *enginev1.Command {
	cmd := lockCmd(mainQueue, mode, n)
	cmd.GetLock().MaxBytes = maxBytes
	return cmd
}

func TestReceiveStopsBeforeItsByteBudget(t *testing.T) {
	for _, mode := range []raftbusv1.ReceiveMode{peekLock, receiveDel} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			seqs := h.sendBodies(10)
			// Room for three and a half messages.
			const budget = 7 * bodySize / 2
			var got []int64
			for len(got) < len(seqs) {
				msgs := h.ok(budgetedLock(mode, 1000, budget)).GetLock().GetMessages()
				if size := answerSize(msgs); len(msgs) != min(3, len(seqs)-len(got)) || size > budget {
					t.Fatalf("a receive of up to %d bytes got %d messages, %d bytes encoded", budget, len(msgs), size)
				}
				got = append(got, seqsOf(msgs)...)
			}
			// Every message was received once, in order.
			if !slices.Equal(got, seqs) {
				t.Fatalf("received %v, want %v", got, seqs)
			}
		})
	}
}

func TestReceiveTakesOneMessageLargerThanItsBudget(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendBodies(2)
	if got := seqsOf(h.ok(budgetedLock(peekLock, 10, 1000)).GetLock().GetMessages()); !slices.Equal(got, seqs[:1]) {
		t.Fatalf("a receive of up to 1000 bytes got %v, want the first message alone", got)
	}
	if got := seqsOf(h.ok(budgetedLock(peekLock, 10, 0)).GetLock().GetMessages()); !slices.Equal(got, seqs[1:]) {
		t.Fatalf("a receive without a byte budget got %v, want %v", got, seqs[1:])
	}
}

func TestRepeatedReceiveReturnsWhatItsBudgetLetTheFirstTake(t *testing.T) {
	for _, mode := range []raftbusv1.ReceiveMode{peekLock, receiveDel} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			seqs := h.sendBodies(6)
			cmd := func(maxBytes int64) *enginev1.Command {
				c := budgetedLock(mode, 1000, maxBytes)
				c.GetLock().ReceiveId = []byte("r1")
				return c
			}
			first := h.ok(cmd(5 * bodySize / 2)).GetLock().GetMessages()
			if !slices.Equal(seqsOf(first), seqs[:2]) {
				t.Fatalf("first receive got %v, want %v", seqsOf(first), seqs[:2])
			}
			// A repeat returns what the first received, whatever its own
			// budget, and receives nothing more.
			for _, maxBytes := range []int64{0, 1, 10 * bodySize} {
				again := h.ok(cmd(maxBytes)).GetLock().GetMessages()
				if !slices.Equal(seqsOf(again), seqsOf(first)) {
					t.Fatalf("repeat with a budget of %d got %v, want %v", maxBytes, seqsOf(again), seqsOf(first))
				}
			}
			replay := cmd(1)
			replay.GetLock().Replay = true
			if got := seqsOf(h.ok(replay).GetLock().GetMessages()); !slices.Equal(got, seqs[:2]) {
				t.Fatalf("replay got %v, want %v", got, seqs[:2])
			}
			if got := seqsOf(h.ok(budgetedLock(mode, 1000, 0)).GetLock().GetMessages()); !slices.Equal(got, seqs[2:]) {
				t.Fatalf("a new receive after the repeats got %v, want the other messages %v", got, seqs[2:])
			}
		})
	}
}

func TestReceiveDeferredTakesWhatItsBudgetAllowsInTheOrderAsked(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendBodies(5)
	for _, m := range h.lock(5) {
		h.settle(m, deferIt)
	}
	asked := []int64{seqs[3], seqs[1], seqs[4], seqs[0], seqs[2]}
	cmd := func(seqs []int64) *enginev1.Command {
		return &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
			EntityPath: testQueue, SequenceNumbers: seqs, MaxBytes: 5 * bodySize / 2,
		}}}
	}
	got := h.ok(cmd(asked)).GetReceiveDeferred().GetMessages()
	if !slices.Equal(seqsOf(got), asked[:2]) {
		t.Fatalf("received %v, want the first two asked %v", seqsOf(got), asked[:2])
	}
	if c := h.counts(); c.GetDeferredMessageCount() != 3 || c.GetLockedMessageCount() != 2 {
		t.Fatalf("counts %v, want 3 still deferred", c)
	}
	// All or nothing still: a number that is not deferred receives none.
	h.fails(cmd(asked), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if got := seqsOf(h.ok(cmd(asked[2:])).GetReceiveDeferred().GetMessages()); !slices.Equal(got, asked[2:4]) {
		t.Fatalf("asking again for the rest got %v, want %v", got, asked[2:4])
	}
}

func TestSessionReceiveAndDeleteStopsBeforeItsByteBudget(t *testing.T) {
	h := newSessionHarness(t, nil)
	for i := range 4 {
		h.send(&raftbusv1.Message{MessageId: "m" + string(rune('0'+i)), SessionId: "a", Body: make([]byte, bodySize)})
	}
	s := h.accept("a")
	cmd := sessionLockCmd(s, receiveDel, 10)
	cmd.GetLock().MaxBytes = 5 * bodySize / 2
	if got := ids(h.ok(cmd).GetLock().GetMessages()); !slices.Equal(got, []string{"m0", "m1"}) {
		t.Fatalf("session receive got %v, want m0 m1", got)
	}
	cmd = sessionLockCmd(s, receiveDel, 10)
	if got := ids(h.ok(cmd).GetLock().GetMessages()); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("next session receive got %v, want m2 m3", got)
	}
}

func TestPeekStopsBeforeItsByteBudget(t *testing.T) {
	h := newSessionHarness(t, nil)
	for i := range 4 {
		h.send(&raftbusv1.Message{MessageId: "m" + string(rune('0'+i)), SessionId: "a", Body: make([]byte, bodySize)})
	}
	const budget = 5 * bodySize / 2
	ms, err := h.e.Peek(testQueue, mainQueue, 0, 100, budget)
	if err != nil || !slices.Equal(ids(ms), []string{"m0", "m1"}) || answerSize(ms) > budget {
		t.Fatalf("peek: %v, %v (%d bytes), want m0 m1 within %d bytes", ids(ms), err, answerSize(ms), budget)
	}
	ms, err = h.e.PeekSession(testQueue, "a", ms[1].GetSequenceNumber()+1, 100, budget)
	if err != nil || !slices.Equal(ids(ms), []string{"m2", "m3"}) {
		t.Fatalf("session peek: %v, %v, want m2 m3", ids(ms), err)
	}
	if ms, _ := h.e.Peek(testQueue, mainQueue, 0, 100, 1); len(ms) != 1 {
		t.Fatalf("peek with a budget smaller than a message got %d, want 1", len(ms))
	}
}

// TestReceivedSizeBoundsTheEncoding checks the bound the budgets count
// with against the encoding of messages with every field at its largest:
// locked, from the dead-letter sub-queue, with properties and long
// dead-letter texts.
func TestReceivedSizeBoundsTheEncoding(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{DefaultMessageTimeToLive: dur(time.Hour), MaxDeliveryCount: ptr(int32(1))})
	long := strings.Repeat("é", 2048)
	h.send(&raftbusv1.Message{
		MessageId: strings.Repeat("i", 128), Body: make([]byte, 1000), SessionId: "s", CorrelationId: "c", Subject: long,
		ContentType: "t", ReplyTo: "r", To: "x", TimeToLive: dur(time.Minute),
		ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: long}}},
	}, &raftbusv1.Message{Body: []byte("b")}, &raftbusv1.Message{})
	msgs := h.lock(3)
	h.ok(&enginev1.Command{Body: &enginev1.Command_Settle{Settle: &enginev1.Settle{
		EntityPath: testQueue, LockToken: msgs[0].GetLockToken(), Disposition: deadLetterIt,
		DeadLetterReason: long, DeadLetterErrorDescription: long,
	}}})
	h.advance(2 * time.Minute) // the others' locks expire: delivered once, they are dead-lettered
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	q := h.e.entities[testQueue].deadLetter
	dl := h.ok(lockCmd(deadLetter, peekLock, 10)).GetLock().GetMessages()
	if len(dl) != 3 {
		t.Fatalf("%d dead-lettered messages, want 3", len(dl))
	}
	for _, r := range dl {
		m := h.e.lookup(q, r.GetSequenceNumber())
		if got, bound := answerSize([]*raftbusv1.ReceivedMessage{r}), m.receivedSize(); int64(got) > bound {
			t.Errorf("message %d encodes in %d bytes, over its bound of %d", r.GetSequenceNumber(), got, bound)
		}
	}
}
