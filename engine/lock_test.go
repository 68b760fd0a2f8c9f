package engine

import (
	"slices"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	mainQueue    = raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED
	deadLetter   = raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER
	peekLock     = raftbusv1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK
	receiveDel   = raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE
	complete     = enginev1.Disposition_DISPOSITION_COMPLETE
	abandon      = enginev1.Disposition_DISPOSITION_ABANDON
	deadLetterIt = enginev1.Disposition_DISPOSITION_DEAD_LETTER
	deferIt      = enginev1.Disposition_DISPOSITION_DEFER
)

func TestPeekLockLocksAvailableMessagesInSequenceOrder(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(5)
	first := h.lock(3)
	if got := seqsOf(first); !slices.Equal(got, seqs[:3]) {
		t.Fatalf("locked %v, want %v", got, seqs[:3])
	}
	for _, m := range first {
		if m.GetLockedUntil().AsTime().UnixMilli() != h.now+DefaultLockDuration.Milliseconds() || m.GetDeliveryCount() != 1 {
			t.Fatalf("lock %v", m)
		}
	}
	if got := seqsOf(h.lock(10)); !slices.Equal(got, seqs[3:]) {
		t.Fatalf("second receiver got %v, want only the unlocked %v", got, seqs[3:])
	}
	if got := h.lock(10); len(got) != 0 {
		t.Fatalf("locked messages were handed out again: %v", seqsOf(got))
	}
	if c := h.counts(); c.GetActiveMessageCount() != 5 || c.GetLockedMessageCount() != 5 {
		t.Fatalf("counts %v", c)
	}
}

func TestLockTokensAreDistinctAndDerivedFromTheSeed(t *testing.T) {
	run := func() [][]byte {
		h := newHarness(t, nil)
		h.sendN(50)
		var toks [][]byte
		for _, m := range h.lock(50) {
			toks = append(toks, m.GetLockToken())
		}
		return toks
	}
	a, b := run(), run()
	seen := map[string]bool{}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			t.Fatalf("token %d differs between replicas", i)
		}
		if seen[string(a[i])] {
			t.Fatalf("token %d repeated", i)
		}
		seen[string(a[i])] = true
	}
}

func TestCompleteRemovesTheMessage(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(2)
	got := h.lock(1)
	h.settle(got[0], complete)
	if c := h.counts(); c.GetActiveMessageCount() != 1 || c.GetLockedMessageCount() != 0 || c.GetSizeInBytes() != int64(len("m1")+len("body")) {
		t.Fatalf("counts %v", c)
	}
	if p := h.peek(mainQueue, 0, 10); len(p) != 1 || p[0].GetMessage().GetMessageId() != "m1" {
		t.Fatalf("peek %v", ids(p))
	}
}

func TestAbandonRedeliversInSequenceOrder(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(4)
	got := h.lock(2) // m0, m1
	h.settle(got[1], abandon)
	h.settle(got[0], abandon)
	again := h.lock(10)
	if !slices.Equal(seqsOf(again), seqs) {
		t.Fatalf("after abandon got %v, want %v", seqsOf(again), seqs)
	}
	if again[0].GetDeliveryCount() != 2 || again[2].GetDeliveryCount() != 1 {
		t.Fatalf("delivery counts %d %d", again[0].GetDeliveryCount(), again[2].GetDeliveryCount())
	}
}

func TestAbandonWithPropertiesModifiesTheMessage(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(1)
	m := h.lock(1)[0]
	cmd := settleCmd(mainQueue, m.GetLockToken(), abandon)
	cmd.GetSettle().PropertiesToModify = map[string]*raftbusv1.PropertyValue{"tries": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 1}}}
	h.ok(cmd)
	again := h.lock(1)[0]
	if again.GetMessage().GetApplicationProperties()["tries"].GetIntValue() != 1 {
		t.Fatalf("properties %v", again.GetMessage().GetApplicationProperties())
	}
}

func TestExpiredLockMakesTheMessageAvailableAgain(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second)})
	seqs := h.sendN(2)
	h.lock(1)
	h.advance(10*time.Second - time.Millisecond)
	if got := h.lock(10); !slices.Equal(seqsOf(got), seqs[1:]) {
		t.Fatalf("before expiry got %v", seqsOf(got))
	}
	h.advance(time.Millisecond)
	got := h.lock(10)
	if !slices.Equal(seqsOf(got), seqs[:1]) || got[0].GetDeliveryCount() != 2 {
		t.Fatalf("after expiry got %v", got)
	}
}

func TestRenewLockExtendsTheLock(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{LockDuration: dur(10 * time.Second)})
	h.sendN(1)
	m := h.lock(1)[0]
	h.advance(8 * time.Second)
	res := h.ok(&enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testQueue, LockToken: m.GetLockToken()}}})
	if got := res.GetRenewLock().GetLockedUntil().AsTime().UnixMilli(); got != h.now+10_000 {
		t.Fatalf("locked until %d, want %d", got, h.now+10_000)
	}
	h.advance(8 * time.Second) // past the first expiry, before the renewed one
	if got := h.lock(1); len(got) != 0 {
		t.Fatalf("renewed message delivered again")
	}
	h.settle(m, complete)
}

func TestDeliveryCountCountsDeliveries(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(1)
	for want := int32(1); want <= 5; want++ {
		m := h.lock(1)[0]
		if m.GetDeliveryCount() != want {
			t.Fatalf("delivery %d has count %d", want, m.GetDeliveryCount())
		}
		h.settle(m, abandon)
	}
	if p := h.peek(mainQueue, 0, 1); p[0].GetDeliveryCount() != 5 {
		t.Fatalf("peek counted a delivery: %d", p[0].GetDeliveryCount())
	}
}

func TestMaxDeliveryCountMovesTheMessageToDeadLetter(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *harness, m *raftbusv1.ReceivedMessage)
	}{
		{"abandon", func(h *harness, m *raftbusv1.ReceivedMessage) { h.settle(m, abandon) }},
		{"lock expiry", func(h *harness, m *raftbusv1.ReceivedMessage) { h.advance(time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &raftbusv1.QueueProperties{MaxDeliveryCount: ptr[int32](3)})
			seq := h.sendN(1)[0]
			for range 3 {
				tc.end(h, h.lock(1)[0])
			}
			if got := h.lock(1); len(got) != 0 {
				t.Fatalf("delivered a fourth time")
			}
			dl := h.lockDeadLetters(1)
			if len(dl) != 1 || dl[0].GetDeadLetterReason() != "MaxDeliveryCountExceeded" ||
				dl[0].GetSequenceNumber() != seq || dl[0].GetEnqueuedSequenceNumber() != seq || dl[0].GetDeliveryCount() != 4 || // 3, and this receive
				dl[0].GetDeadLetterSource() != testQueue {
				t.Fatalf("dead-letter %v", dl)
			}
		})
	}
}

func TestSettlingWithALostLockFailsAndChangesNothing(t *testing.T) {
	unknown := make([]byte, 16)
	unknown[0] = 1
	for _, tc := range []struct {
		name    string
		expired bool
		cmd     func(token []byte) *enginev1.Command
	}{
		{"complete unknown", false, nil},
		{"complete expired", true, nil},
		{"abandon expired", true, func(tok []byte) *enginev1.Command { return settleCmd(mainQueue, tok, abandon) }},
		{"dead-letter expired", true, func(tok []byte) *enginev1.Command { return settleCmd(mainQueue, tok, deadLetterIt) }},
		{"defer expired", true, func(tok []byte) *enginev1.Command { return settleCmd(mainQueue, tok, deferIt) }},
		{"renew expired", true, func(tok []byte) *enginev1.Command {
			return &enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testQueue, LockToken: tok}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.sendN(2)
			m := h.lock(1)[0]
			tok := unknown
			if tc.expired {
				tok = m.GetLockToken()
				h.advance(time.Minute)
				h.ok(tickCmd())
			}
			before := h.e.Digest()
			cmd := settleCmd(mainQueue, tok, complete)
			if tc.cmd != nil {
				cmd = tc.cmd(tok)
			}
			h.fails(cmd, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
			if h.e.Digest() != before {
				t.Fatal("a failed settlement changed the state")
			}
		})
	}
}

func TestReceiveAndDeleteRemovesOnReceive(t *testing.T) {
	h := newHarness(t, nil)
	seqs := h.sendN(3)
	got := h.ok(lockCmd(mainQueue, receiveDel, 2)).GetLock().GetMessages()
	if !slices.Equal(seqsOf(got), seqs[:2]) || len(got[0].GetLockToken()) != 0 || got[0].GetDeliveryCount() != 1 {
		t.Fatalf("received %v", got)
	}
	if c := h.counts(); c.GetActiveMessageCount() != 1 || c.GetLockedMessageCount() != 0 {
		t.Fatalf("counts %v", c)
	}
}

func TestReceiveFromAnUnknownEntityIsNotFound(t *testing.T) {
	h := newHarness(t, nil)
	cmd := lockCmd(mainQueue, peekLock, 1)
	cmd.GetLock().EntityPath = "nope"
	h.fails(cmd, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

func ptr[T any](v T) *T { return &v }
