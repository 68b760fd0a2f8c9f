package engine

import (
	"bytes"
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func completeTransferCmd(nums ...uint64) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_CompleteTransfer{CompleteTransfer: &enginev1.CompleteTransfer{Numbers: nums}}}
}

// A subscription with forward_to keeps its copies in transfer, each with
// the topic's shared body counted once; completing them frees the topic's
// bytes, and other subscriptions keep theirs.
func TestSubscriptionCopiesGoIntoTransfer(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("fwd", &raftbusv1.SubscriptionProperties{ForwardTo: "elsewhere"})
	h.subscribe("plain", nil)
	h.publish(&raftbusv1.Message{MessageId: "m0", Body: []byte("hello")}, &raftbusv1.Message{MessageId: "m1", Body: []byte("world")})
	if got := h.countsOf(subPath("fwd")).GetTransferMessageCount(); got != 2 {
		t.Fatalf("transfer count %d, want 2", got)
	}
	if ms := h.peekSub("fwd", mainQueue); len(ms) != 0 {
		t.Fatalf("peek shows %d messages in transfer", len(ms))
	}
	if ms := h.peekSub("plain", mainQueue); len(ms) != 2 {
		t.Fatalf("the other subscription has %d copies, want 2", len(ms))
	}
	xs := h.e.Transfers(10, 1<<20)
	h.log.resolve(t, h.e.TakeBodies())
	if len(xs) != 2 || xs[0].From != subPath("fwd") || xs[0].To != "elsewhere" || string(xs[1].Message.GetBody()) != "world" {
		t.Fatalf("transfers %+v", xs)
	}
	if got := h.e.Transfers(10, 1); len(got) != 1 {
		t.Fatalf("a byte budget of 1 gives %d transfers, want the first alone", len(got))
	}
	before := h.countsOf(testTopic).GetSizeInBytes()
	h.ok(completeTransferCmd(xs[0].Number, xs[1].Number))
	checkInvariants(t, h.e)
	// The copies' ids leave; the bodies stay, shared with "plain".
	if h.e.TransferCount() != 0 || h.countsOf(testTopic).GetSizeInBytes() != before-4 {
		t.Fatalf("after completion: %d in transfer; topic bytes %d, were %d",
			h.e.TransferCount(), h.countsOf(testTopic).GetSizeInBytes(), before)
	}
}

// Deleting an entity drops its transfers; a snapshot keeps the others, the
// transfer counter and the marks of accepted streams.
func TestTransfersOfDeletedEntitiesAreDroppedAndSnapshotsKeepTheRest(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{ForwardTo: "a"})
	h.configure("other", &raftbusv1.QueueProperties{ForwardTo: "b"})
	h.send(&raftbusv1.Message{MessageId: "q0"})
	h.ok(&enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: "other", Messages: []*raftbusv1.Message{{MessageId: "o0"}}}}})
	h.send(&raftbusv1.Message{MessageId: "q1"})
	h.ok(&enginev1.Command{Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: &enginev1.AcceptTransfer{
		EntityPath: "other", Stream: "src", Messages: []*enginev1.TransferredMessage{{Number: 9, Message: &raftbusv1.Message{MessageId: "in"}}},
	}}})
	h.ok(deleteCmd(testQueue))
	checkInvariants(t, h.e)
	xs := h.e.Transfers(10, 1<<20)
	h.log.resolve(t, h.e.TakeBodies())
	if len(xs) != 2 || xs[0].From != "other" || xs[0].Number != 2 || xs[1].Message.GetMessageId() != "in" || xs[1].Number != 4 {
		t.Fatalf("transfers after the delete: %+v", xs)
	}
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r := New(0, 1)
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	if r.Digest() != h.e.Digest() {
		t.Fatal("the restored engine differs")
	}
	res := r.Apply(&enginev1.Command{NowUnixMs: h.now, EngineVersion: Version, Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: &enginev1.AcceptTransfer{
		EntityPath: "other", Stream: "src", Messages: []*enginev1.TransferredMessage{{Number: 9, Message: &raftbusv1.Message{MessageId: "in"}}},
	}}})
	if !res.GetAcceptTransfer().GetMessages()[0].GetDuplicate() {
		t.Fatalf("a repeat after a restore: %v", res)
	}
	r.Apply(&enginev1.Command{NowUnixMs: h.now, EngineVersion: Version, Body: &enginev1.Command_Send{Send: &enginev1.Send{
		EntityPath: "other", Messages: []*raftbusv1.Message{{MessageId: "o1"}}}}})
	if xs := r.Transfers(10, 1<<20); len(xs) != 3 || xs[2].Number != 5 {
		t.Fatalf("the restored counter: %+v", xs)
	}
}
