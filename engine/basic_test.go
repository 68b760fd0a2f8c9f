package engine

import (
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestSendLockCompleteRemovesMessage(t *testing.T) {
	h := newHarness(t, nil)
	res := h.send(&raftbusv1.Message{MessageId: "a", Body: []byte("hello")})
	if len(res) != 1 || res[0].GetSequenceNumber() != 1 || res[0].GetEnqueuedTime().AsTime().UnixMilli() != startMs {
		t.Fatalf("send result %v", res)
	}
	got := h.lock(10)
	if len(got) != 1 || string(got[0].GetMessage().GetBody()) != "hello" || got[0].GetDeliveryCount() != 1 ||
		len(got[0].GetLockToken()) != 16 || got[0].GetLockedUntil().AsTime().UnixMilli() != startMs+60_000 {
		t.Fatalf("locked %v", got)
	}
	if c := h.counts(); c.GetActiveMessageCount() != 1 || c.GetLockedMessageCount() != 1 {
		t.Fatalf("counts %v", c)
	}
	if again := h.lock(10); len(again) != 0 {
		t.Fatalf("a locked message was delivered again: %v", again)
	}
	h.settle(got[0], enginev1.Disposition_DISPOSITION_COMPLETE)
	if c := h.counts(); c.GetActiveMessageCount() != 0 || c.GetSizeInBytes() != 0 {
		t.Fatalf("counts after complete %v", c)
	}
}
