package engine

import (
	"slices"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestDeadLetterKeepsTheMessageAndCarriesReasonDescriptionAndProperties(t *testing.T) {
	h := newHarness(t, nil)
	seq := h.sendN(1)[0]
	enqueued := h.now
	h.advance(time.Second)
	h.settle(h.lock(1)[0], abandon)
	m := h.lock(1)[0]
	cmd := settleCmd(mainQueue, m.GetLockToken(), deadLetterIt)
	s := cmd.GetSettle()
	s.DeadLetterReason, s.DeadLetterErrorDescription = "Poison", "cannot parse"
	s.PropertiesToModify = map[string]*raftbusv1.PropertyValue{"stage": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "parse"}}}
	h.ok(cmd)
	if c := h.counts(); c.GetActiveMessageCount() != 0 || c.GetDeadLetterMessageCount() != 1 {
		t.Fatalf("counts %v", c)
	}
	p := h.peek(deadLetter, 0, 10)
	if len(p) != 1 {
		t.Fatalf("dead-letter peek %v", p)
	}
	got := p[0]
	if got.GetDeadLetterReason() != "Poison" || got.GetDeadLetterErrorDescription() != "cannot parse" ||
		got.GetDeadLetterSource() != testQueue || got.GetSequenceNumber() != seq || got.GetEnqueuedSequenceNumber() != seq ||
		got.GetEnqueuedTime().AsTime().UnixMilli() != enqueued || got.GetDeliveryCount() != 2 || got.GetMessage().GetMessageId() != "m0" ||
		got.GetMessage().GetApplicationProperties()["stage"].GetStringValue() != "parse" || string(got.GetMessage().GetBody()) != "body" {
		t.Fatalf("dead-lettered message %v", got)
	}
	if p := h.peek(deadLetter, seq, 1); len(p) != 1 || p[0].GetSequenceNumber() != seq {
		t.Fatalf("dead-letter peek from %d: %v", seq, p)
	}
	if p := h.peek(mainQueue, seq, 1); len(p) != 0 {
		t.Fatalf("the main queue still shows %v", p)
	}
}

func TestDeadLetterSubQueueIsReceivableAndSettleable(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{DefaultMessageTimeToLive: dur(time.Minute), LockDuration: dur(5 * time.Second)})
	h.sendN(3)
	for _, m := range h.lock(3) {
		h.settle(m, deadLetterIt)
	}
	h.advance(2 * time.Minute) // beyond the time to live: not observed in the dead-letter sub-queue
	got := h.lockDeadLetters(2)
	if len(got) != 2 || !slices.Equal(ids(got), []string{"m0", "m1"}) {
		t.Fatalf("dead-letter receive %v", ids(got))
	}
	h.ok(settleCmd(deadLetter, got[0].GetLockToken(), complete))
	h.ok(settleCmd(deadLetter, got[1].GetLockToken(), abandon))
	h.fails(settleCmd(deadLetter, h.lockDeadLetters(1)[0].GetLockToken(), deadLetterIt), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	h.advance(5 * time.Second) // the dead-letter lock expires: available again
	got = h.lockDeadLetters(5)
	if !slices.Equal(ids(got), []string{"m1", "m2"}) {
		t.Fatalf("after abandon and expiry %v", ids(got))
	}
	rd := h.ok(lockCmd(deadLetter, receiveDel, 5))
	if len(rd.GetLock().GetMessages()) != 0 {
		t.Fatal("locked dead letters were received again")
	}
	if c := h.counts(); c.GetDeadLetterMessageCount() != 2 {
		t.Fatalf("counts %v", c)
	}
}

func TestDeferredMessageIsReceivedOnlyBySequenceNumber(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(2)
	h.settle(h.lock(1)[0], deferIt)
	if c := h.counts(); c.GetDeferredMessageCount() != 1 || c.GetActiveMessageCount() != 1 {
		t.Fatalf("counts %v", c)
	}
	if got := h.lock(10); !slices.Equal(seqsOf(got), seqs[1:]) {
		t.Fatalf("a receive returned %v", seqsOf(got))
	}
	rdCmd := func(mode raftbusv1.ReceiveMode, seqs ...int64) *enginev1.Command {
		return &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
			EntityPath: testQueue, ReceiveMode: mode, SequenceNumbers: seqs,
		}}}
	}
	h.fails(rdCmd(peekLock, seqs[0], seqs[1]), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND) // seqs[1] is not deferred
	got := h.ok(rdCmd(peekLock, seqs[0])).GetReceiveDeferred().GetMessages()
	if len(got) != 1 || got[0].GetState() != raftbusv1.MessageState_MESSAGE_STATE_DEFERRED || got[0].GetDeliveryCount() != 2 {
		t.Fatalf("received deferred %v", got)
	}
	h.settle(got[0], abandon) // back to deferred, not to the available set
	if c := h.counts(); c.GetDeferredMessageCount() != 1 {
		t.Fatalf("counts after abandon %v", c)
	}
	got = h.ok(rdCmd(peekLock, seqs[0])).GetReceiveDeferred().GetMessages()
	h.settle(got[0], complete)
	if c := h.counts(); c.GetDeferredMessageCount() != 0 || c.GetLockedMessageCount() != 1 {
		t.Fatalf("counts after complete %v", c)
	}
}

func TestReceiveDeferredAndDelete(t *testing.T) {
	h := newHarness(t, nil)
	seq := h.sendN(1)[0]
	h.settle(h.lock(1)[0], deferIt)
	h.ok(&enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, ReceiveMode: receiveDel, SequenceNumbers: []int64{seq, seq},
	}}})
	if c := h.counts(); c.GetDeferredMessageCount() != 0 || c.GetSizeInBytes() != 0 {
		t.Fatalf("counts %v", c)
	}
}

func TestPeekShowsEveryStateWithoutLocking(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(3)
	future := h.now + 60_000
	sched := h.send(&raftbusv1.Message{MessageId: "later", ScheduledEnqueueTime: timestamp(future)})[0]
	ms := h.lock(2)
	h.settle(ms[1], deferIt)
	p := h.peek(mainQueue, 0, 10)
	wantStates := []raftbusv1.MessageState{
		raftbusv1.MessageState_MESSAGE_STATE_ACTIVE, raftbusv1.MessageState_MESSAGE_STATE_DEFERRED,
		raftbusv1.MessageState_MESSAGE_STATE_ACTIVE, raftbusv1.MessageState_MESSAGE_STATE_SCHEDULED,
	}
	if !slices.Equal(seqsOf(p), append(slices.Clone(seqs), sched.GetSequenceNumber())) {
		t.Fatalf("peek %v", seqsOf(p))
	}
	for i, m := range p {
		if m.GetState() != wantStates[i] || len(m.GetLockToken()) != 0 {
			t.Fatalf("peeked %d: %v", i, m)
		}
	}
	if p := h.peek(mainQueue, seqs[1], 2); !slices.Equal(seqsOf(p), seqs[1:3]) {
		t.Fatalf("peek from %d: %v", seqs[1], seqsOf(p))
	}
	if got := h.lock(10); !slices.Equal(seqsOf(got), seqs[2:3]) || got[0].GetDeliveryCount() != 1 {
		t.Fatalf("peek disturbed receiving: %v", got)
	}
	if _, err := h.e.Peek("nope", mainQueue, 0, 1, 0); err == nil {
		t.Fatal("peek of an unknown entity succeeded")
	}
}
