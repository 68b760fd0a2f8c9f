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

// A dead letter forwarded by forward_dead_lettered_messages_to keeps its
// dead-letter reason and description in the target, an entity of another
// partition: received or peeked there it says them, as in Service Bus,
// whether a receiver dead-lettered it or MaxDeliveryCount did; dead-lettered
// again in the target, it says the new ones. (Entries of versions before
// versionForwardedDeadLetterReason handed them out as properties only.)
func TestForwardedDeadLetterKeepsItsReasonInTheTarget(t *testing.T) {
	src := newHarness(t, &raftbusv1.QueueProperties{ForwardDeadLetteredMessagesTo: "errors", MaxDeliveryCount: ptr[int32](1)})
	src.send(&raftbusv1.Message{MessageId: "poison", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": stringProp("v")}},
		&raftbusv1.Message{MessageId: "tired"})
	got := src.lock(2)
	dl := settleCmd(mainQueue, got[0].GetLockToken(), deadLetterIt)
	dl.GetSettle().DeadLetterReason, dl.GetSettle().DeadLetterErrorDescription = "bad input", "field x is missing"
	src.ok(dl)
	src.settle(got[1], abandon)
	xs := src.e.Transfers(10, 1<<20)
	src.log.resolve(t, src.e.TakeBodies())
	if len(xs) != 2 || xs[0].To != "errors" {
		t.Fatalf("transfers %+v", xs)
	}
	accept := &enginev1.AcceptTransfer{EntityPath: "errors", Stream: "orders@1/0"}
	for _, x := range xs {
		accept.Messages = append(accept.Messages, &enginev1.TransferredMessage{Number: x.Number, Message: x.Message})
	}

	want := map[string][2]string{
		"poison": {"bad input", "field x is missing"},
		"tired":  {reasonMaxDeliveryCountExceeded, descriptionMaxDeliveryCount},
	}
	check := func(what string, ms []*raftbusv1.ReceivedMessage, want map[string][2]string) {
		t.Helper()
		if len(ms) != len(want) {
			t.Fatalf("%s: %d messages, want %d", what, len(ms), len(want))
		}
		for _, m := range ms {
			w := want[m.GetMessage().GetMessageId()]
			if m.GetDeadLetterReason() != w[0] || m.GetDeadLetterErrorDescription() != w[1] {
				t.Fatalf("%s: %s says %q (%q), want %q (%q)", what, m.GetMessage().GetMessageId(),
					m.GetDeadLetterReason(), m.GetDeadLetterErrorDescription(), w[0], w[1])
			}
		}
	}
	dst := &harness{t: t, e: New(1, 2), now: src.now, log: &fakeLog{entries: map[uint64][]byte{}}}
	dst.configure("errors", nil)
	dst.ok(&enginev1.Command{Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: accept}})
	peeked, err := dst.e.Peek("errors", mainQueue, 0, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("peeked in the target", peeked, want)
	received := dst.ok(lockOn("errors", mainQueue, 10)).GetLock().GetMessages()
	check("received in the target", received, want)
	if p := received[0].GetMessage().GetApplicationProperties(); p["k"].GetStringValue() != "v" {
		t.Fatalf("the target's message lost its own properties: %v", p)
	}
	again := settleOn("errors", mainQueue, received[0].GetLockToken(), deadLetterIt)
	again.GetSettle().DeadLetterReason = "still bad"
	dst.ok(again)
	dead := dst.ok(lockOn("errors", raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER, 10)).GetLock().GetMessages()
	check("dead-lettered again in the target", dead, map[string][2]string{received[0].GetMessage().GetMessageId(): {"still bad", ""}})

	old := &harness{t: t, e: New(1, 2), now: src.now, log: &fakeLog{entries: map[uint64][]byte{}}}
	old.version = ptr[uint32](versionForwardedDeadLetterReason - 1)
	old.configure("errors", nil)
	old.ok(&enginev1.Command{Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: accept}})
	check("received by an older version", old.ok(lockOn("errors", mainQueue, 10)).GetLock().GetMessages(), map[string][2]string{"poison": {}, "tired": {}})
}
