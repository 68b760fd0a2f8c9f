package engine

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func (h *harness) counters(path string) Counters {
	h.t.Helper()
	var out Counters
	found := false
	h.e.EachCounters(func(p string, c Counters) {
		if p == path {
			out, found = c, true
		}
	})
	if !found {
		h.t.Fatalf("no counters for %q", path)
	}
	return out
}

func TestCountersCountEveryKindOfEvent(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{
		RequiresDuplicateDetection: proto.Bool(true),
		MaxDeliveryCount:           proto.Int32(1),
		DefaultMessageTimeToLive:   dur(time.Hour),
	})
	h.sendN(10)
	h.send(&raftbusv1.Message{MessageId: "m0"}) // a duplicate
	ms := h.lock(6)
	h.settle(ms[0], enginev1.Disposition_DISPOSITION_COMPLETE)
	h.settle(ms[1], enginev1.Disposition_DISPOSITION_COMPLETE)
	h.settle(ms[2], enginev1.Disposition_DISPOSITION_DEAD_LETTER)
	h.settle(ms[3], enginev1.Disposition_DISPOSITION_DEFER)
	// MaxDeliveryCount 1: a deferral and an abandon dead-letter as well.
	h.settle(ms[4], enginev1.Disposition_DISPOSITION_ABANDON)
	// The lock of the last one runs out first, and dead-letters it (its
	// deliveries used up); then the 4 available expire.
	h.advance(2 * time.Hour)
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})

	want := Counters{Sent: 10, Duplicates: 1, Received: 6, Completed: 2, Abandoned: 1, Deferred: 1, DeadLettered: 4, Expired: 4}
	if got := h.counters(testQueue); got != want {
		t.Fatalf("counters\n got %+v\nwant %+v", got, want)
	}
}

func TestCountersAreNotState(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(3)
	before := h.e.Digest()
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New(0, 1)
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if restored.Digest() != before {
		t.Fatal("digest changed across a snapshot")
	}
	var c Counters
	restored.EachCounters(func(_ string, cs Counters) { c = cs })
	if c != (Counters{}) {
		t.Fatalf("a restored engine starts counting afresh, got %+v", c)
	}
}
