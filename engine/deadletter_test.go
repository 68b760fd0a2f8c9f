package engine

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func receiveDeferredCmd(sq raftbusv1.SubQueue, seqs ...int64) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, SubQueue: sq, SequenceNumbers: seqs,
	}}}
}

// deadLetterOutOfOrder dead-letters the messages of seqs in the order
// 3, 1, 4, 0, 2 (settlement, abandon past MaxDeliveryCount, lock expiry).
func deadLetterOutOfOrder(t *testing.T, h *harness) {
	t.Helper()
	ms := h.lock(5)
	if len(ms) != 5 {
		t.Fatalf("locked %d", len(ms))
	}
	h.settle(ms[3], deadLetterIt)
	h.settle(ms[1], abandon) // its only delivery used up
	h.settle(ms[4], deadLetterIt)
	h.advance(time.Minute) // the locks of 0 and 2 expire
	h.ok(tickCmd())
}

func TestDeadLetteredMessagesKeepTheirNumbersInSequenceOrder(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{MaxDeliveryCount: ptr[int32](1)})
	seqs := h.sendN(5)
	deadLetterOutOfOrder(t, h)
	if c := h.counts(); c.GetActiveMessageCount() != 0 || c.GetDeadLetterMessageCount() != 5 {
		t.Fatalf("counts %v", c)
	}
	if got := h.peek(deadLetter, 0, 10); !slices.Equal(seqsOf(got), seqs) || got[0].GetEnqueuedSequenceNumber() != seqs[0] {
		t.Fatalf("dead-letter peek %v, want numbers %v", seqsOf(got), seqs)
	}
	if got := h.peek(deadLetter, seqs[2], 2); !slices.Equal(seqsOf(got), seqs[2:4]) {
		t.Fatalf("dead-letter peek from %d: %v", seqs[2], seqsOf(got))
	}
	// Received in sequence order, whatever the order they came in.
	got := h.lockDeadLetters(2)
	if !slices.Equal(seqsOf(got), seqs[:2]) {
		t.Fatalf("dead-letter receive %v", seqsOf(got))
	}
	// Deferred in the dead-letter sub-queue, and received there by number.
	h.ok(settleCmd(deadLetter, got[0].GetLockToken(), deferIt))
	h.ok(settleCmd(deadLetter, got[1].GetLockToken(), abandon))
	h.fails(receiveDeferredCmd(mainQueue, seqs[0]), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	rd := h.ok(receiveDeferredCmd(deadLetter, seqs[0])).GetReceiveDeferred().GetMessages()
	if len(rd) != 1 || rd[0].GetSequenceNumber() != seqs[0] || rd[0].GetState() != raftbusv1.MessageState_MESSAGE_STATE_DEFERRED ||
		rd[0].GetMessage().GetMessageId() != "m0" || rd[0].GetDeadLetterSource() != testQueue {
		t.Fatalf("deferred dead letter %v", rd)
	}
	h.ok(settleCmd(deadLetter, rd[0].GetLockToken(), complete))
	if got := h.lockDeadLetters(10); !slices.Equal(seqsOf(got), seqs[1:]) {
		t.Fatalf("the rest of the dead letters %v", seqsOf(got))
	}
}

func TestDeadLetteredMessagesKeepTheirPartitionedNumbers(t *testing.T) {
	h := newHarness(t, nil)
	h.e = New(3, 4)
	h.configure(testQueue, &raftbusv1.QueueProperties{MaxDeliveryCount: ptr[int32](1)})
	h.e.nextOrder = 1<<48 - 2 // the counter rolls over at z
	var seqs []int64
	for _, r := range h.send(&raftbusv1.Message{MessageId: "x"}, &raftbusv1.Message{MessageId: "y"}, &raftbusv1.Message{MessageId: "z"}) {
		seqs = append(seqs, r.GetSequenceNumber())
	}
	ms := h.lock(3)
	h.settle(ms[2], deadLetterIt)
	h.settle(ms[0], deadLetterIt)
	got := h.peek(deadLetter, 0, 10)
	if want := []int64{seqs[0], seqs[2]}; !slices.Equal(seqsOf(got), want) {
		t.Fatalf("dead letters %x, want %x", seqsOf(got), want)
	}
	for _, m := range got {
		if raftbusv1.PartitionOfSequence(m.GetSequenceNumber()) != 3 || m.GetPartitionId() != 3 {
			t.Fatalf("dead letter %x names partition %d", m.GetSequenceNumber(), raftbusv1.PartitionOfSequence(m.GetSequenceNumber()))
		}
	}
	if got := h.peek(deadLetter, seqs[2], 10); !slices.Equal(seqsOf(got), seqs[2:]) {
		t.Fatalf("dead-letter peek from %x: %x", seqs[2], seqsOf(got))
	}
	dl := h.lockDeadLetters(1)
	h.ok(settleCmd(deadLetter, dl[0].GetLockToken(), deferIt))
	rd := h.ok(receiveDeferredCmd(deadLetter, seqs[0])).GetReceiveDeferred().GetMessages()
	if len(rd) != 1 || rd[0].GetMessage().GetMessageId() != "x" {
		t.Fatalf("deferred dead letter by number %x: %v", seqs[0], rd)
	}
}

func TestSnapshotKeepsDeadLettersInSequenceOrder(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{MaxDeliveryCount: ptr[int32](1)})
	h.sendN(5)
	deadLetterOutOfOrder(t, h)
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New(0, 1)
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, restored)
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest differs after restore")
	}
}

// Entries written before versionDeadLetterKeepsSequence replay as they
// were applied: the dead-lettered message got a new number.
func TestEntriesOfVersion0DeadLetterUnderANewNumber(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{MaxDeliveryCount: ptr[int32](1)})
	h.version = ptr[uint32](0)
	seqs := h.sendN(3)
	ms := h.lock(3)
	h.settle(ms[1], deadLetterIt)
	got := h.peek(deadLetter, 0, 10)
	if len(got) != 1 || got[0].GetSequenceNumber() != seqs[2]+1 || got[0].GetEnqueuedSequenceNumber() != seqs[1] {
		t.Fatalf("dead letter of version 0: %v", got)
	}
	// The leader now runs this build: the next one keeps its number, and
	// takes its place before the one numbered anew.
	h.version = nil
	h.settle(ms[0], deadLetterIt)
	got = h.peek(deadLetter, 0, 10)
	if !slices.Equal(seqsOf(got), []int64{seqs[0], seqs[2] + 1}) || got[1].GetEnqueuedSequenceNumber() != seqs[1] {
		t.Fatalf("dead letters %v", got)
	}
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New(0, 1)
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest differs after restore")
	}
}

func TestSubscriptionDeadLettersKeepTheTopicsNumbers(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("a", nil)
	h.subscribe("b", nil)
	sent := h.publish(&raftbusv1.Message{MessageId: "0"}, &raftbusv1.Message{MessageId: "1", Body: []byte("shared")})
	held := h.countsOf(testTopic).GetSizeInBytes()
	for _, sub := range []string{"a", "b"} {
		ms := h.lockSub(sub, mainQueue, 2)
		h.settleSub(sub, ms[1], deadLetterIt)
		h.settleSub(sub, ms[0], deadLetterIt)
		if got := h.peekSub(sub, deadLetter); !slices.Equal(seqsOf(got), []int64{sent[0].GetSequenceNumber(), sent[1].GetSequenceNumber()}) {
			t.Fatalf("%s dead letters %v", sub, seqsOf(got))
		}
	}
	// The copies still share one body.
	if got := h.countsOf(testTopic).GetSizeInBytes(); got != held || held != int64(2*len("01")+len("shared")) {
		t.Fatalf("topic holds %d bytes, held %d before", got, held)
	}
}

// TestMessageLogInsertKeepsOrder inserts and removes at random and checks
// the log against a sorted list.
func TestMessageLogInsertKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l messageLog
	var want []*message
	for i := range 20_000 {
		if len(want) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(want))
			if rng.IntN(2) == 0 {
				j = 0 // a queue is mostly received from its front
			}
			if !l.remove(want[j]) {
				t.Fatalf("step %d: order %d not found", i, want[j].order)
			}
			want = slices.Delete(want, j, j+1)
		} else {
			m := &message{order: uint64(rng.IntN(5000)) + 1}
			if _, found := slices.BinarySearchFunc(want, m.order, func(x *message, o uint64) int { return int(x.order) - int(o) }); found {
				continue
			}
			l.insert(m)
			k, _ := slices.BinarySearchFunc(want, m.order, func(x *message, o uint64) int { return int(x.order) - int(o) })
			want = slices.Insert(want, k, m)
		}
		var got []*message
		l.ascend(0, func(m *message) bool { got = append(got, m); return true })
		if !slices.Equal(got, want) || l.Len() != len(want) || (len(want) > 0 && l.first() != want[0]) {
			t.Fatalf("step %d: log holds %d messages out of place, want %d", i, len(got), len(want))
		}
		for _, m := range want {
			if l.get(m.order) != m {
				t.Fatalf("step %d: order %d not found", i, m.order)
			}
		}
	}
}
