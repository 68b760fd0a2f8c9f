package engine

import (
	"bytes"
	"slices"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestSequenceNumbersAreGapFreeOverEveryNumberHandedOut(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{RequiresDuplicateDetection: ptr(true)})
	var handed []int64
	for _, r := range h.send(&raftbusv1.Message{MessageId: "a"}, &raftbusv1.Message{MessageId: "a"}, &raftbusv1.Message{MessageId: "b"}) {
		if !r.GetDuplicate() {
			handed = append(handed, r.GetSequenceNumber())
		}
	}
	sched := h.send(&raftbusv1.Message{MessageId: "c", ScheduledEnqueueTime: timestamp(h.now + 1000)})[0]
	handed = append(handed, sched.GetSequenceNumber())
	h.fails(sendCmd(&raftbusv1.Message{Body: make([]byte, 300<<10)}), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED)
	h.advance(time.Second)
	m := h.lock(10) // a, b, c activated
	handed = append(handed, m[2].GetSequenceNumber())
	h.settle(m[0], deadLetterIt) // keeps its number: hands out none
	if dl := h.peek(deadLetter, 0, 1)[0]; dl.GetSequenceNumber() != m[0].GetSequenceNumber() {
		t.Fatalf("dead-lettered as %d, received as %d", dl.GetSequenceNumber(), m[0].GetSequenceNumber())
	}
	handed = append(handed, h.send(&raftbusv1.Message{MessageId: "d"})[0].GetSequenceNumber())
	for i, s := range handed {
		if s != int64(i+1) {
			t.Fatalf("numbers handed out %v, want 1, 2, 3, ...", handed)
		}
	}
}

func TestPartitionedSequenceNumbersCarryThePartitionAndRollOver(t *testing.T) {
	h := newHarness(t, nil)
	h.e = New(3, 4)
	h.configure(testQueue, nil)
	h.e.nextOrder = 1<<48 - 2
	var seqs []int64
	for _, r := range h.send(&raftbusv1.Message{MessageId: "x"}, &raftbusv1.Message{MessageId: "y"}, &raftbusv1.Message{MessageId: "z"}) {
		seqs = append(seqs, r.GetSequenceNumber())
		if r.GetPartitionId() != 3 {
			t.Fatalf("partition id %d", r.GetPartitionId())
		}
	}
	want := []int64{3<<48 | (1<<48 - 2), 3<<48 | (1<<48 - 1), 3 << 48}
	if !slices.Equal(seqs, want) {
		t.Fatalf("sequence numbers %x, want %x", seqs, want)
	}
	// Order survives the roll-over: z, numbered lowest, was sent last.
	ms := h.lock(1)
	h.settle(ms[0], deferIt)
	if got := ids(h.lock(10)); !slices.Equal(got, []string{"y", "z"}) {
		t.Fatalf("received %v", got)
	}
	rd := h.ok(&enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, SequenceNumbers: []int64{seqs[0]},
	}}})
	if got := ids(rd.GetReceiveDeferred().GetMessages()); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("received deferred %v", got)
	}
}

func TestUnpartitionedSequenceNumbersUse63Bits(t *testing.T) {
	h := newHarness(t, nil)
	h.e.nextOrder = 1<<63 - 1
	r := h.send(&raftbusv1.Message{}, &raftbusv1.Message{})
	if r[0].GetSequenceNumber() != 1<<63-1 || r[1].GetSequenceNumber() != 0 {
		t.Fatalf("sequence numbers %d %d", r[0].GetSequenceNumber(), r[1].GetSequenceNumber())
	}
}

func TestEnqueuedTimeNeverGoesBackwards(t *testing.T) {
	h := newHarness(t, nil)
	first := h.send(&raftbusv1.Message{})[0].GetEnqueuedTime().AsTime()
	h.now -= 5000 // a new leader with a slower clock
	second := h.send(&raftbusv1.Message{})[0].GetEnqueuedTime().AsTime()
	if second.Before(first) {
		t.Fatalf("enqueued %v after %v", second, first)
	}
}

func TestDuplicateWithinTheWindowIsAcceptedButNotEnqueued(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{RequiresDuplicateDetection: ptr(true), DuplicateDetectionHistoryTimeWindow: dur(time.Minute)})
	first := h.send(&raftbusv1.Message{MessageId: "id", Body: []byte("1")})[0]
	h.advance(59 * time.Second)
	dup := h.send(&raftbusv1.Message{MessageId: "id", Body: []byte("2")}, &raftbusv1.Message{MessageId: "other"}, &raftbusv1.Message{MessageId: "other"})
	if first.GetDuplicate() || !dup[0].GetDuplicate() || dup[1].GetDuplicate() || !dup[2].GetDuplicate() {
		t.Fatalf("results %v then %v", first, dup)
	}
	// A duplicate is answered as its first copy was: a send repeated after
	// an unknown outcome learns what the first attempt got.
	if dup[0].GetSequenceNumber() != first.GetSequenceNumber() || !dup[0].GetEnqueuedTime().AsTime().Equal(first.GetEnqueuedTime().AsTime()) {
		t.Fatalf("duplicate answered %v, first copy got %v", dup[0], first)
	}
	if dup[2].GetSequenceNumber() != dup[1].GetSequenceNumber() || dup[2].GetSequenceNumber() == 0 {
		t.Fatalf("duplicate in the batch answered %v, its first copy got %v", dup[2], dup[1])
	}
	if c := h.counts(); c.GetActiveMessageCount() != 2 {
		t.Fatalf("counts %v", c)
	}
	if d, ok := h.e.NextDeadline(); !ok || d != startMs+60_000 {
		t.Fatalf("next deadline %d, want the end of the first window", d)
	}
	h.advance(time.Second) // the window of the first "id" ends
	if again := h.send(&raftbusv1.Message{MessageId: "id"})[0]; again.GetDuplicate() {
		t.Fatal("an id was remembered past its window")
	}
}

func TestDuplicateOfAScheduledMessageIsAnsweredWithItsScheduleNumber(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{RequiresDuplicateDetection: ptr(true)})
	m := &raftbusv1.Message{MessageId: "later", ScheduledEnqueueTime: timestamp(h.now + 60_000)}
	first := h.send(m)[0]
	again := h.send(m)[0]
	if !first.GetScheduled() || !again.GetDuplicate() || !again.GetScheduled() || again.GetSequenceNumber() != first.GetSequenceNumber() {
		t.Fatalf("first %v, repeat %v", first, again)
	}
	// The number answered cancels the one scheduled message.
	h.ok(&enginev1.Command{Body: &enginev1.Command_CancelScheduled{CancelScheduled: &enginev1.CancelScheduled{
		EntityPath: testQueue, SequenceNumbers: []int64{again.GetSequenceNumber()}}}})
	if c := h.counts(); c.GetScheduledMessageCount() != 0 {
		t.Fatalf("counts after cancelling %v", c)
	}
}

func TestMessageSizeLimitIsEnforced(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{MaxMessageSizeInKilobytes: ptr[int64](1)})
	h.send(&raftbusv1.Message{Body: make([]byte, 1024)})
	e := h.fails(sendCmd(&raftbusv1.Message{Body: make([]byte, 1024), MessageId: "x"}), raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED)
	if e.GetMessage() == "" {
		t.Fatal("no message")
	}
}

func TestQuotaRejectsTheWholeBatch(t *testing.T) {
	h := newHarness(t, nil)
	h.configure(testQueue, nil)
	h.ok(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: testQueue, MaxSizeBytes: 3000}}})
	h.send(&raftbusv1.Message{Body: make([]byte, 1000)}, &raftbusv1.Message{Body: make([]byte, 1000)})
	before := h.e.Digest()
	h.fails(sendCmd(&raftbusv1.Message{Body: make([]byte, 500)}, &raftbusv1.Message{Body: make([]byte, 501)}), raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED)
	if h.e.Digest() != before {
		t.Fatal("a rejected batch changed the state")
	}
	h.send(&raftbusv1.Message{Body: make([]byte, 1000)})
	if c := h.counts(); c.GetActiveMessageCount() != 3 || c.GetSizeInBytes() != 3000 {
		t.Fatalf("counts %v", c)
	}
}

func TestMalformedCommandsFailWithoutChangingAnything(t *testing.T) {
	for name, cmd := range map[string]*enginev1.Command{
		"no body":         {},
		"short seed":      {TokenSeed: []byte{1}, Body: &enginev1.Command_Tick{Tick: &enginev1.Tick{}}},
		"no entity":       {Body: &enginev1.Command_Send{Send: &enginev1.Send{}}},
		"nil message":     sendCmd(nil),
		"bad sub-queue":   lockCmd(7, peekLock, 1),
		"bad mode":        lockCmd(mainQueue, 9, 1),
		"bad disposition": settleCmd(mainQueue, make([]byte, 16), 0),
		"short token":     settleCmd(mainQueue, []byte{1, 2}, complete),
		"bad ttl":         sendCmd(&raftbusv1.Message{TimeToLive: dur(-time.Second)}),
		"session key":     sendCmd(&raftbusv1.Message{SessionId: "a", PartitionKey: "b"}),
		"long id":         sendCmd(&raftbusv1.Message{MessageId: string(bytes.Repeat([]byte("x"), 129))}),
		"bad utf-8":       sendCmd(&raftbusv1.Message{Subject: "\xff"}),
		"int16 range":     sendCmd(propMessage(&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int16Value{Int16Value: 40000}})),
		"int8 range":      sendCmd(propMessage(&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int8Value{Int8Value: -129}})),
		"uint16 range":    sendCmd(propMessage(&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint16Value{Uint16Value: 65536}})),
		"uint8 range":     sendCmd(propMessage(&raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint8Value{Uint8Value: 256}})),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.sendN(1)
			before := h.e.Digest()
			h.now += 10_000
			res := h.e.Apply(cmd)
			if res.GetError().GetReason() != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
				t.Fatalf("result %v", res)
			}
			if h.e.Digest() != before {
				t.Fatal("state changed")
			}
		})
	}
}

// propMessage is a message with one application property.
func propMessage(pv *raftbusv1.PropertyValue) *raftbusv1.Message {
	return &raftbusv1.Message{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"p": pv}}
}

func TestSessionEntityRequiresASessionID(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{RequiresSession: ptr(true)})
	h.fails(sendCmd(&raftbusv1.Message{}), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	h.send(&raftbusv1.Message{SessionId: "s"})
	h.fails(lockCmd(mainQueue, peekLock, 1), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}
