package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestTopicMessageKeepsTopicSequenceNumberAndEnqueuedTimeInEverySubscription(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("a", nil)
	h.subscribe("b", nil)
	h.advance(time.Second)
	sent := h.publish(&raftbusv1.Message{MessageId: "x", Body: []byte("hello")}, &raftbusv1.Message{MessageId: "y"})
	if sent[1].GetSequenceNumber() != sent[0].GetSequenceNumber()+1 {
		t.Fatalf("topic handed out %d then %d", sent[0].GetSequenceNumber(), sent[1].GetSequenceNumber())
	}
	for _, sub := range []string{"a", "b"} {
		got := h.lockSub(sub, mainQueue, 10)
		if !slices.Equal(seqsOf(got), []int64{sent[0].GetSequenceNumber(), sent[1].GetSequenceNumber()}) {
			t.Fatalf("%s: sequence numbers %v, sent %v", sub, seqsOf(got), sent)
		}
		for i, m := range got {
			if !m.GetEnqueuedTime().AsTime().Equal(sent[i].GetEnqueuedTime().AsTime()) || m.GetEnqueuedTime().AsTime().UnixMilli() != h.now {
				t.Fatalf("%s: enqueued %v, topic said %v", sub, m.GetEnqueuedTime(), sent[i].GetEnqueuedTime())
			}
		}
		if string(got[0].GetMessage().GetBody()) != "hello" || got[0].GetMessage().GetMessageId() != "x" {
			t.Fatalf("%s: copy %v", sub, got[0].GetMessage())
		}
	}
}

func TestTopicHasNoReceivers(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("a", nil)
	h.publish(&raftbusv1.Message{MessageId: "x"})
	token := make([]byte, 16)
	for _, cmd := range []*enginev1.Command{
		lockOn(testTopic, mainQueue, 1),
		lockOn(testTopic, deadLetter, 1),
		settleOn(testTopic, mainQueue, token, complete),
		{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: testTopic, LockToken: token}}},
		{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{EntityPath: testTopic, SequenceNumbers: []int64{1}}}},
	} {
		if e := h.fails(cmd, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT); !bytes.Contains([]byte(e.GetMessage()), []byte("topic")) {
			t.Fatalf("%T: unclear error %q", cmd.GetBody(), e.GetMessage())
		}
	}
	if h.e.HasAvailable(testTopic, mainQueue) {
		t.Fatal("a topic reports a message available")
	}
	if got := h.lockSub("a", mainQueue, 1); len(got) != 1 {
		t.Fatal("the failed receives from the topic took the subscription's copy")
	}
	h.fails(&enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: subPath("a"), Messages: []*raftbusv1.Message{{}}}}},
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

func TestTopicDetectsDuplicatesBeforeFanningOut(t *testing.T) {
	h := newTopicHarness(t, &raftbusv1.TopicProperties{RequiresDuplicateDetection: ptr(true)})
	h.subscribe("a", nil)
	first := h.publish(&raftbusv1.Message{MessageId: "x"}, &raftbusv1.Message{MessageId: "x"})
	again := h.publish(&raftbusv1.Message{MessageId: "x"})
	if first[0].GetDuplicate() || !first[1].GetDuplicate() || !again[0].GetDuplicate() {
		t.Fatalf("duplicates %v %v", first, again)
	}
	if got := h.peekSub("a", mainQueue); len(got) != 1 {
		t.Fatalf("subscription holds %d copies of one message", len(got))
	}
	h.advance(DefaultDuplicateDetectionWindow + time.Millisecond)
	if r := h.publish(&raftbusv1.Message{MessageId: "x"}); r[0].GetDuplicate() {
		t.Fatal("the id was remembered past its window")
	}
}

func TestTopicEnforcesItsSizeLimits(t *testing.T) {
	h := newTopicHarness(t, &raftbusv1.TopicProperties{MaxMessageSizeInKilobytes: ptr[int64](1)})
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testTopic, Topic: &raftbusv1.TopicProperties{MaxMessageSizeInKilobytes: ptr[int64](1)}, MaxSizeBytes: 3000,
	}}})
	for _, name := range []string{"a", "b", "c"} {
		h.subscribe(name, nil)
	}
	h.fails(publishCmd(&raftbusv1.Message{Body: make([]byte, 1025)}), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED)
	// Three subscriptions hold each 1000-byte body once.
	h.publish(&raftbusv1.Message{Body: make([]byte, 1000)}, &raftbusv1.Message{Body: make([]byte, 1000)})
	if got := h.countsOf(testTopic).GetSizeInBytes(); got != 2000 {
		t.Fatalf("topic holds %d bytes, want 2000", got)
	}
	if got := h.countsOf(subPath("a")).GetSizeInBytes(); got != 2000 {
		t.Fatalf("subscription holds %d bytes, want 2000", got)
	}
	h.fails(publishCmd(&raftbusv1.Message{Body: make([]byte, 1001)}), raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED)
	h.publish(&raftbusv1.Message{Body: make([]byte, 1000)})
}

func TestTopicMessageTimeToLiveExpiresEveryCopy(t *testing.T) {
	h := newTopicHarness(t, &raftbusv1.TopicProperties{DefaultMessageTimeToLive: dur(time.Hour)})
	h.subscribe("keeps", nil)
	h.subscribe("short", &raftbusv1.SubscriptionProperties{DefaultMessageTimeToLive: dur(time.Minute), DeadLetteringOnMessageExpiration: ptr(true)})
	h.publish(&raftbusv1.Message{MessageId: "ttl", TimeToLive: dur(10 * time.Minute)}, &raftbusv1.Message{MessageId: "default"})
	h.advance(time.Minute)
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	if got := ids(h.peekSub("short", deadLetter)); !slices.Equal(got, []string{"ttl", "default"}) {
		t.Fatalf("short subscription dead-lettered %v", got)
	}
	if got := ids(h.peekSub("keeps", mainQueue)); len(got) != 2 {
		t.Fatalf("a subscription without its own time to live lost %v", got)
	}
	h.advance(9 * time.Minute)
	if got := ids(h.lockSub("keeps", mainQueue, 10)); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("after the message's time to live: %v", got)
	}
	h.advance(time.Hour)
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	if n := h.countsOf(subPath("keeps")); n.GetActiveMessageCount()+n.GetDeadLetterMessageCount() != 0 {
		t.Fatalf("after the topic's time to live: %v", n)
	}
}

func TestSubscriptionIsAQueueInEveryRespect(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("s", &raftbusv1.SubscriptionProperties{LockDuration: dur(10 * time.Second), MaxDeliveryCount: ptr[int32](2)})
	seqs := []int64{}
	for i := range 4 {
		seqs = append(seqs, h.publish(&raftbusv1.Message{MessageId: fmt.Sprint(i)})[0].GetSequenceNumber())
	}
	if !h.e.HasAvailable(subPath("s"), mainQueue) {
		t.Fatal("HasAvailable says no")
	}
	got := h.lockSub("s", mainQueue, 4)
	if got[0].GetLockedUntil().AsTime().UnixMilli() != h.now+10_000 || got[0].GetDeliveryCount() != 1 {
		t.Fatalf("lock %v", got[0])
	}
	// Renew, complete, defer and dead-letter.
	h.advance(5 * time.Second)
	r := h.ok(&enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{EntityPath: subPath("s"), LockToken: got[0].GetLockToken()}}})
	if r.GetRenewLock().GetLockedUntil().AsTime().UnixMilli() != h.now+10_000 {
		t.Fatalf("renewed until %v", r.GetRenewLock().GetLockedUntil())
	}
	h.settleSub("s", got[1], complete)
	h.settleSub("s", got[2], deferIt)
	h.settleSub("s", got[3], deadLetterIt)
	c := h.countsOf(subPath("s"))
	if c.GetActiveMessageCount() != 1 || c.GetLockedMessageCount() != 1 || c.GetDeferredMessageCount() != 1 || c.GetDeadLetterMessageCount() != 1 {
		t.Fatalf("counts %v", c)
	}
	deferred := h.ok(&enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: subPath("s"), SequenceNumbers: []int64{seqs[2]},
	}}}).GetReceiveDeferred().GetMessages()
	if len(deferred) != 1 || deferred[0].GetMessage().GetMessageId() != "2" {
		t.Fatalf("deferred %v", deferred)
	}
	dl := h.lockSub("s", deadLetter, 1)
	if len(dl) != 1 || dl[0].GetDeadLetterSource() != subPath("s") || dl[0].GetSequenceNumber() != seqs[3] || dl[0].GetEnqueuedSequenceNumber() != seqs[3] {
		t.Fatalf("dead-lettered %v", dl)
	}
	// The renewed lock expires twice: MaxDeliveryCount sends it to the
	// dead-letter sub-queue.
	h.advance(10 * time.Second)
	again := h.lockSub("s", mainQueue, 1)
	if len(again) != 1 || again[0].GetSequenceNumber() != seqs[0] || again[0].GetDeliveryCount() != 2 {
		t.Fatalf("redelivered %v", again)
	}
	h.advance(10 * time.Second)
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	// The deferred message received by sequence number was not settled
	// either: both locks expired a second time.
	if got := h.peekSub("s", deadLetter); !slices.Equal(ids(got), []string{"0", "2", "3"}) || !slices.Equal(seqsOf(got), []int64{seqs[0], seqs[2], seqs[3]}) ||
		got[0].GetDeadLetterReason() != reasonMaxDeliveryCountExceeded {
		t.Fatalf("dead-letter sub-queue %v", got)
	}
	// ReceiveAndDelete.
	h.publish(&raftbusv1.Message{MessageId: "rd"})
	rd := h.ok(&enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: subPath("s"), ReceiveMode: receiveDel}}}).GetLock().GetMessages()
	if len(rd) != 1 || h.countsOf(subPath("s")).GetActiveMessageCount() != 0 {
		t.Fatalf("receive and delete %v", rd)
	}
}

func TestSubscriptionRequiringSessionNeedsSessionIDsAndSessionReceivers(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("plain", nil)
	at := h.now + 1000
	h.publish(&raftbusv1.Message{MessageId: "early", ScheduledEnqueueTime: timestamp(at)})
	h.subscribe("s", &raftbusv1.SubscriptionProperties{RequiresSession: ptr(true)})
	h.fails(publishCmd(&raftbusv1.Message{SessionId: "a"}, &raftbusv1.Message{}), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	h.publish(&raftbusv1.Message{SessionId: "a"})
	// A message scheduled without a session id before the subscription
	// came goes only where it can.
	h.now = at
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	if got := h.peekSub("plain", mainQueue); len(got) != 2 {
		t.Fatalf("plain subscription holds %v", got)
	}
	h.fails(lockOn(subPath("s"), mainQueue, 1), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	if got := h.peekSub("s", mainQueue); len(got) != 1 || got[0].GetMessage().GetSessionId() != "a" {
		t.Fatalf("subscription holds %v", got)
	}
}

func TestBodyIsStoredOncePerPartition(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.inline = true // bodies in memory (TestTopicCopiesShareTheirBodyOnDisk: on disk)
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		h.subscribe(n, nil)
	}
	h.subscribe("actions", nil, withAction(sqlRule("r", "1=1"), "SET tagged = 1"))
	h.publish(&raftbusv1.Message{MessageId: "x", Body: bytes.Repeat([]byte("b"), 4096)})
	same := func(e *Engine) {
		t.Helper()
		var first *byte
		for _, n := range append(names, "actions") {
			m := e.entities[subPath(n)].main.fresh.first()
			if first == nil {
				first = &m.body[0]
			} else if &m.body[0] != first {
				t.Fatalf("subscription %q has its own copy of the body", n)
			}
		}
	}
	same(h.e)
	if got := h.countsOf(testTopic).GetSizeInBytes(); got < 4096 || got >= 2*4096 {
		t.Fatalf("topic holds %d bytes for one 4096-byte body", got)
	}
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 2*4096 {
		t.Fatalf("a snapshot of one shared body takes %d bytes", buf.Len())
	}
	restored := New(0, 1)
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, restored)
	same(restored)
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest differs after restore")
	}
}

func TestScheduledTopicMessageFansOutWhenItActivates(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("early", nil)
	at := h.now + 60_000
	sent := h.publish(&raftbusv1.Message{MessageId: "later", Subject: "x", ScheduledEnqueueTime: timestamp(at)})
	cancelled := h.publish(&raftbusv1.Message{MessageId: "cancelled", ScheduledEnqueueTime: timestamp(at)})
	if !sent[0].GetScheduled() {
		t.Fatal("not scheduled")
	}
	if got := h.peekSub("early", mainQueue); len(got) != 0 {
		t.Fatalf("copied before activation: %v", got)
	}
	if c := h.countsOf(testTopic); c.GetScheduledMessageCount() != 2 {
		t.Fatalf("topic counts %v", c)
	}
	h.ok(&enginev1.Command{Body: &enginev1.Command_CancelScheduled{CancelScheduled: &enginev1.CancelScheduled{
		EntityPath: testTopic, SequenceNumbers: []int64{cancelled[0].GetSequenceNumber()},
	}}})
	// Subscriptions and rules of activation time decide.
	h.subscribe("late", nil)
	h.subscribe("filtered", nil, sqlRule("none", "sys.Label = 'y'"))
	if d, ok := h.e.NextDeadline(); !ok || d != at {
		t.Fatalf("next deadline %d %v, want %d", d, ok, at)
	}
	h.now = at
	h.ok(&enginev1.Command{Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}})
	for _, sub := range []string{"early", "late"} {
		got := h.peekSub(sub, mainQueue)
		if len(got) != 1 || got[0].GetMessage().GetMessageId() != "later" || got[0].GetEnqueuedTime().AsTime().UnixMilli() != at ||
			got[0].GetSequenceNumber() <= sent[0].GetSequenceNumber() {
			t.Fatalf("%s after activation: %v", sub, got)
		}
	}
	if len(h.peekSub("filtered", mainQueue)) != 0 {
		t.Fatal("a rule that does not match took the activated message")
	}
	if c := h.countsOf(testTopic); c.GetScheduledMessageCount() != 0 || c.GetActiveMessageCount() != 0 {
		t.Fatalf("topic still holds messages: %v", c)
	}
}

func TestRuntimeCountsArePerSubscriptionAndTopicCountsSubscriptions(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("all", nil)
	h.subscribe("some", nil, sqlRule("even", "n % 2 = 0"))
	for i := range 6 {
		h.publish(&raftbusv1.Message{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": intProp(int64(i))}})
	}
	if a, s := h.countsOf(subPath("all")), h.countsOf(subPath("some")); a.GetActiveMessageCount() != 6 || s.GetActiveMessageCount() != 3 {
		t.Fatalf("counts all %v, some %v", a, s)
	}
	h.lockSub("some", mainQueue, 2)
	if s := h.countsOf(subPath("some")); s.GetLockedMessageCount() != 2 || s.GetActiveMessageCount() != 3 {
		t.Fatalf("some after lock %v", s)
	}
	if a := h.countsOf(subPath("all")); a.GetLockedMessageCount() != 0 {
		t.Fatalf("a lock in one subscription shows in another: %v", a)
	}
	subs, err := h.e.Subscriptions(testTopic)
	if err != nil || !slices.Equal(subs, []string{subPath("all"), subPath("some")}) {
		t.Fatalf("subscriptions %v %v", subs, err)
	}
	if _, err := h.e.Subscriptions(subPath("all")); err == nil {
		t.Fatal("a subscription has subscriptions")
	}
}

func TestDeletingSubscriptionFreesWhatOnlyItHeld(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.inline = true // what the bodies in memory take
	h.subscribe("all", nil)
	h.subscribe("half", nil, sqlRule("even", "n % 2 = 0"))
	const n, size = 200, 20_000
	for i := range n {
		h.publish(&raftbusv1.Message{Body: make([]byte, size), ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": intProp(int64(i))}})
	}
	full := h.countsOf(testTopic).GetSizeInBytes()
	if full < n*size || full > n*size+n*100 {
		t.Fatalf("topic holds %d bytes for %d bodies of %d", full, n, size)
	}
	var own int64 // what "half" holds besides shared bodies
	for _, m := range h.peekSub("half", mainQueue) {
		own += int64(len(m.GetMessage().GetMessageId()))
	}
	h.e.entities[subPath("half")].main.all.ascend(0, func(m *message) bool { own += int64(len(m.meta)); return true })
	h.ok(deleteCmd(subPath("half")))
	if got := h.countsOf(testTopic).GetSizeInBytes(); got != full-own {
		// "half" held only shared bodies and its own properties.
		t.Fatalf("after deleting a subscription sharing every body: %d bytes, was %d", got, full)
	}
	before := liveHeap()
	h.ok(deleteCmd(subPath("all")))
	if got := h.countsOf(testTopic).GetSizeInBytes(); got != 0 {
		t.Fatalf("topic holds %d bytes with no subscriptions", got)
	}
	if freed := before - liveHeap(); freed < n*size*9/10 {
		t.Fatalf("deleting the last subscription freed %d bytes of %d bytes of bodies", freed, n*size)
	}
	if _, err := h.e.RuntimeProperties(subPath("all")); err == nil {
		t.Fatal("deleted subscription still there")
	}
}

func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func TestDeletingTopicDeletesItsSubscriptions(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("a", nil)
	h.configure(testQueue, nil)
	h.publish(&raftbusv1.Message{})
	h.lockSub("a", mainQueue, 1)
	h.ok(deleteCmd(testTopic))
	if len(h.e.entities) != 1 || h.e.entities[testQueue] == nil {
		t.Fatalf("entities left: %v", h.e.sorted)
	}
	if _, ok := h.e.NextDeadline(); ok {
		t.Fatal("a deleted subscription's lock still has a deadline")
	}
	h.fails(subscribeCmd("a", nil), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

func TestEntityKindAndSubscriptionPathAreChecked(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.configure(testQueue, nil)
	for name, cmd := range map[string]*enginev1.Command{
		"topic as queue":        {Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testTopic}}},
		"queue as topic":        {Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue, Topic: &raftbusv1.TopicProperties{}}}},
		"subscription path":     {Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: "x/subscriptions/y"}}},
		"subscription bad path": {Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testTopic + "/s", Subscription: &raftbusv1.SubscriptionProperties{}}}},
		"both kinds": {Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: subPath("s"),
			Topic: &raftbusv1.TopicProperties{}, Subscription: &raftbusv1.SubscriptionProperties{}}}},
		"queue with rules":  {Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue, Rules: []*raftbusv1.RuleProperties{sqlRule("r", "1=1")}}}},
		"bad lock duration": subscribeCmd("s", &raftbusv1.SubscriptionProperties{LockDuration: dur(time.Hour)}),
	} {
		t.Run(name, func(t *testing.T) {
			before := h.e.Digest()
			h.fails(cmd, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
			if h.e.Digest() != before {
				t.Fatal("a refused configuration changed the state")
			}
		})
	}
	h.fails(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testQueue + subscriptionsSegment + "s", Subscription: &raftbusv1.SubscriptionProperties{},
	}}}, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

func TestNormalizeTopicAndSubscriptionPropertiesApplyDefaults(t *testing.T) {
	tp, err := NormalizeTopicProperties(&raftbusv1.TopicProperties{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if tp.GetName() != "t" || tp.GetDefaultMessageTimeToLive().AsDuration() != UnlimitedTimeToLive || tp.GetRequiresDuplicateDetection() ||
		tp.GetDuplicateDetectionHistoryTimeWindow().AsDuration() != DefaultDuplicateDetectionWindow || tp.GetMaxSizeInMegabytes() != DefaultMaxSizeInMegabytes ||
		tp.GetMaxMessageSizeInKilobytes() != DefaultMaxMessageSizeInKilobytes || tp.GetPartitionCount() != 1 || !tp.GetEnableBatchedOperations() || !tp.GetSupportOrdering() ||
		tp.GetAutoDeleteOnIdle().AsDuration() != NeverAutoDelete {
		t.Fatalf("topic defaults %v", tp)
	}
	sp, err := NormalizeSubscriptionProperties(&raftbusv1.SubscriptionProperties{TopicName: "t", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if sp.GetTopicName() != "t" || sp.GetLockDuration().AsDuration() != DefaultLockDuration || sp.GetMaxDeliveryCount() != DefaultMaxDeliveryCount ||
		sp.RequiresSession == nil || sp.GetRequiresSession() || !sp.GetDeadLetteringOnFilterEvaluationExceptions() || sp.DeadLetteringOnMessageExpiration == nil ||
		sp.GetAutoDeleteOnIdle().AsDuration() != NeverAutoDelete {
		t.Fatalf("subscription defaults %v", sp)
	}
	for name, err := range map[string]error{
		"topic window":      second(NormalizeTopicProperties(&raftbusv1.TopicProperties{DuplicateDetectionHistoryTimeWindow: dur(time.Second)})),
		"topic size":        second(NormalizeTopicProperties(&raftbusv1.TopicProperties{MaxSizeInMegabytes: ptr[int64](0)})),
		"topic partitions":  second(NormalizeTopicProperties(&raftbusv1.TopicProperties{PartitionCount: ptr[uint32](1 << 17)})),
		"subscription lock": second(NormalizeSubscriptionProperties(&raftbusv1.SubscriptionProperties{LockDuration: dur(0)})),
		"subscription mdc":  second(NormalizeSubscriptionProperties(&raftbusv1.SubscriptionProperties{MaxDeliveryCount: ptr[int32](0)})),
		"subscription name": second(NormalizeSubscriptionProperties(&raftbusv1.SubscriptionProperties{SubscriptionName: "\xff"})),
		"topic idle":        second(NormalizeTopicProperties(&raftbusv1.TopicProperties{AutoDeleteOnIdle: dur(time.Minute)})),
		"subscription idle": second(NormalizeSubscriptionProperties(&raftbusv1.SubscriptionProperties{AutoDeleteOnIdle: dur(time.Minute)})),
	} {
		if e, ok := err.(*Error); !ok || e.Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestTopicSnapshotRoundTripKeepsSubscriptionsRulesAndCopies(t *testing.T) {
	h := newTopicHarness(t, &raftbusv1.TopicProperties{RequiresDuplicateDetection: ptr(true)})
	h.subscribe("all", nil)
	h.subscribe("red", &raftbusv1.SubscriptionProperties{MaxDeliveryCount: ptr[int32](3)},
		withAction(sqlRule("red", "color = 'red'"), "SET seen = 'yes'"), correlationRule("blue", &raftbusv1.CorrelationFilter{Subject: "blue"}))
	for i, c := range []string{"red", "green", "red", "blue"} {
		h.publish(&raftbusv1.Message{MessageId: fmt.Sprint(i), Subject: c, Body: []byte("body " + c),
			ApplicationProperties: map[string]*raftbusv1.PropertyValue{"color": stringProp(c)}})
	}
	h.publish(&raftbusv1.Message{MessageId: "s", ScheduledEnqueueTime: timestamp(h.now + 5000), ApplicationProperties: map[string]*raftbusv1.PropertyValue{"color": stringProp("red")}})
	locked := h.lockSub("red", mainQueue, 2)
	h.settleSub("red", locked[1], deadLetterIt)
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
	for _, p := range []string{testTopic, subPath("all"), subPath("red")} {
		a, b := h.countsOf(p), must(restored.RuntimeProperties(p))
		if a.String() != b.String() {
			t.Fatalf("%s: counts %v, restored %v", p, a, b)
		}
	}
	wantRules := must(h.e.Rules(subPath("red")))
	if got := must(restored.Rules(subPath("red"))); len(got) != 2 || got[0].GetName() != "blue" || got[1].GetAction().GetSqlExpression() != wantRules[1].GetAction().GetSqlExpression() {
		t.Fatalf("restored rules %v", got)
	}
	// The restored engine goes on as the original would.
	ref := h.e
	h.e = restored
	h.settleSub("red", locked[0], complete)
	h.publish(&raftbusv1.Message{MessageId: "new", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"color": stringProp("red")}})
	if r := h.publish(&raftbusv1.Message{MessageId: "0"}); !r[0].GetDuplicate() {
		t.Fatal("restored topic forgot an id")
	}
	h.advance(5 * time.Second)
	got := h.lockSub("red", mainQueue, 10)
	if want := []string{"3", "new", "s"}; !slices.Equal(ids(got), want) {
		t.Fatalf("restored subscription delivered %v, want %v", ids(got), want)
	}
	if p := got[1].GetMessage().GetApplicationProperties()["seen"]; p.GetStringValue() != "yes" {
		t.Fatalf("restored rule action not applied: %v", got[1].GetMessage())
	}
	_ = ref
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRestoreRejectsCopiesThatDoNotShareProperly(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.inline = true // what the bodies in memory take
	h.subscribe("a", nil)
	h.subscribe("b", nil)
	h.publish(&raftbusv1.Message{MessageId: "x", Body: []byte("body")})
	got := h.lockSub("b", mainQueue, 1)
	h.settleSub("b", got[0], deadLetterIt)
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	records := readRecords(t, buf.Bytes())
	var copies []*enginev1.StoredMessage
	for _, r := range records {
		if m := r.GetMessage(); m != nil {
			copies = append(copies, m)
		}
	}
	if len(copies) != 2 || copies[0].GetOriginOrder() == 0 || copies[1].GetOriginOrder() != copies[0].GetOriginOrder() ||
		len(copies[0].GetBody()) == 0 || len(copies[1].GetBody()) != 0 {
		t.Fatalf("copies as written: %v", copies)
	}
	for name, damage := range map[string]func(){
		"no origin":      func() { copies[0].OriginOrder = 0 },
		"other origin":   func() { copies[0].OriginOrder++ },
		"body twice":     func() { copies[1].Body = []byte("again") },
		"dead origin":    func() { copies[1].OriginOrder = copies[1].GetOrder() + 1 },
		"queue with one": func() { records[1].GetEntity().GetConfiguration().Topic = nil },
	} {
		t.Run(name, func(t *testing.T) {
			saved := make([][]byte, len(records))
			for i, r := range records {
				saved[i] = must(proto.Marshal(r))
			}
			damage()
			var w bytes.Buffer
			for _, r := range records {
				if _, err := protodelim.MarshalTo(&w, r); err != nil {
					t.Fatal(err)
				}
			}
			for i := range records {
				records[i] = &enginev1.SnapshotRecord{}
				if err := proto.Unmarshal(saved[i], records[i]); err != nil {
					t.Fatal(err)
				}
			}
			copies = copies[:0]
			for _, r := range records {
				if m := r.GetMessage(); m != nil {
					copies = append(copies, m)
				}
			}
			if err := New(0, 1).Restore(&w); err == nil {
				t.Fatal("a damaged snapshot was restored")
			}
		})
	}
}

func readRecords(t *testing.T, b []byte) []*enginev1.SnapshotRecord {
	t.Helper()
	var out []*enginev1.SnapshotRecord
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		rec := &enginev1.SnapshotRecord{}
		if err := protodelim.UnmarshalFrom(r, rec); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}
