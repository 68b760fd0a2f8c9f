package engine

import (
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func scheduleCmd(msgs ...*raftbusv1.Message) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Schedule{Schedule: &enginev1.Schedule{EntityPath: testQueue, Messages: msgs}}}
}

func cancelCmd(seqs ...int64) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_CancelScheduled{CancelScheduled: &enginev1.CancelScheduled{EntityPath: testQueue, SequenceNumbers: seqs}}}
}

func TestScheduledMessageActivatesAtItsTimeWithANewSequenceNumber(t *testing.T) {
	h := newHarness(t, nil)
	at := h.now + 30_000
	r := h.send(&raftbusv1.Message{MessageId: "s", ScheduledEnqueueTime: timestamp(at)})[0]
	if !r.GetScheduled() || r.GetSequenceNumber() != 1 {
		t.Fatalf("send result %v", r)
	}
	if c := h.counts(); c.GetScheduledMessageCount() != 1 || c.GetActiveMessageCount() != 0 {
		t.Fatalf("counts %v", c)
	}
	if d, ok := h.e.NextDeadline(); !ok || d != at {
		t.Fatalf("next deadline %d %v, want %d", d, ok, at)
	}
	h.advance(29 * time.Second)
	if got := h.lock(1); len(got) != 0 {
		t.Fatal("a scheduled message was received before its time")
	}
	h.advance(5 * time.Second) // the receive comes later than the activation
	got := h.lock(1)
	if len(got) != 1 || got[0].GetSequenceNumber() != 2 || got[0].GetEnqueuedTime().AsTime().UnixMilli() != at {
		t.Fatalf("activated %v", got)
	}
}

func TestScheduleReturnsSequenceNumbersAndCancelDeletes(t *testing.T) {
	h := newHarness(t, nil)
	res := h.ok(scheduleCmd(
		&raftbusv1.Message{MessageId: "a", ScheduledEnqueueTime: timestamp(h.now + 10_000)},
		&raftbusv1.Message{MessageId: "b", ScheduledEnqueueTime: timestamp(h.now + 20_000)},
		&raftbusv1.Message{MessageId: "now", ScheduledEnqueueTime: timestamp(h.now)},
	)).GetSchedule().GetMessages()
	if len(res) != 3 || !res[0].GetScheduled() || !res[1].GetScheduled() || res[2].GetScheduled() {
		t.Fatalf("schedule result %v", res)
	}
	if got := h.ok(cancelCmd(res[0].GetSequenceNumber())).GetCancelScheduled().GetCancelled(); got != 1 {
		t.Fatalf("cancelled %d", got)
	}
	h.advance(20 * time.Second)
	h.ok(tickCmd()) // b activates
	before := h.e.Digest()
	if got := h.ok(cancelCmd(res[0].GetSequenceNumber(), res[1].GetSequenceNumber(), 999)).GetCancelScheduled().GetCancelled(); got != 0 {
		t.Fatalf("cancelled %d of unknown or activated messages", got)
	}
	if h.e.Digest() != before {
		t.Fatal("cancelling activated or unknown messages changed the state")
	}
	if got := ids(h.lock(10)); len(got) != 2 || got[0] != "now" || got[1] != "b" {
		t.Fatalf("received %v", got)
	}
	h.fails(scheduleCmd(&raftbusv1.Message{MessageId: "x"}), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

func TestExpiredMessageIsNeverDelivered(t *testing.T) {
	for _, dl := range []bool{false, true} {
		h := newHarness(t, &raftbusv1.QueueProperties{DefaultMessageTimeToLive: dur(time.Minute), DeadLetteringOnMessageExpiration: &dl})
		h.send(
			&raftbusv1.Message{MessageId: "short", TimeToLive: dur(10 * time.Second)},
			&raftbusv1.Message{MessageId: "capped", TimeToLive: dur(time.Hour)},
			&raftbusv1.Message{MessageId: "default"},
		)
		if p := h.peek(mainQueue, 0, 1); p[0].GetExpiresAt().AsTime().UnixMilli() != h.now+10_000 {
			t.Fatalf("expires at %v", p[0].GetExpiresAt())
		}
		h.advance(10 * time.Second)
		if got := ids(h.lock(10)); len(got) != 2 || got[0] != "capped" {
			t.Fatalf("dead-lettering %v: received %v", dl, got)
		}
		h.advance(time.Minute) // the locked ones expire when their locks end
		if got := h.lock(10); len(got) != 0 {
			t.Fatalf("an expired message was delivered: %v", ids(got))
		}
		c := h.counts()
		want := int64(0)
		if dl {
			want = 3
			if p := h.peek(deadLetter, 0, 1); p[0].GetDeadLetterReason() != "TTLExpiredException" {
				t.Fatalf("reason %q", p[0].GetDeadLetterReason())
			}
		}
		if c.GetActiveMessageCount() != 0 || c.GetDeadLetterMessageCount() != want {
			t.Fatalf("dead-lettering %v: counts %v", dl, c)
		}
	}
}

func TestExpiryAppliesToDeferredMessages(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{DefaultMessageTimeToLive: dur(time.Minute)})
	h.sendN(1)
	h.settle(h.lock(1)[0], deferIt)
	h.advance(time.Minute)
	h.ok(tickCmd())
	if c := h.counts(); c.GetDeferredMessageCount() != 0 || c.GetSizeInBytes() != 0 {
		t.Fatalf("counts %v", c)
	}
}

func tickCmd() *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}}
}
