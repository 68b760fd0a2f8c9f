package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The scenarios of dead letters in a queue are in testdata/dead-letter.txt
// and testdata/settlement.txt.

func receiveDeferredCmd(sq raftbusv1.SubQueue, seqs ...int64) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, SubQueue: sq, SequenceNumbers: seqs,
	}}}
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
