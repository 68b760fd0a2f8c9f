package servicebus

import (
	"math"
	"reflect"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
)

// The SDKs type-assert the broker's annotations without checks: each must
// arrive with exactly its type, after a trip through the wire encoding.
func TestReceivedMessageAnnotationsHaveExactTypes(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	sched := now.Add(time.Hour)
	rm := &client.ReceivedMessage{
		MessageID: "m", Body: []byte("b"), SessionID: "s", PartitionKey: "s", SequenceNumber: 42, EnqueuedSequenceNumber: 7,
		EnqueuedTime: now, LockedUntil: now.Add(time.Minute), DeliveryCount: 3, ScheduledEnqueueTime: &sched,
		DeadLetterSource: "orders", DeadLetterReason: "r", DeadLetterErrorDescription: "d", State: client.MessageStateDeferred,
		LockToken:             [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		ApplicationProperties: map[string]any{"n": int64(5)},
	}
	b, err := fromReceived(rm, true).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var m goamqp.Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"x-opt-sequence-number":         int64(42),
		"x-opt-enqueue-sequence-number": int64(7),
		"x-opt-enqueued-time":           now,
		"x-opt-locked-until":            now.Add(time.Minute),
		"x-opt-scheduled-enqueue-time":  sched,
		"x-opt-partition-key":           "s",
		"x-opt-deadletter-source":       "orders",
		"x-opt-message-state":           int32(1),
	}
	for k, v := range want {
		got := m.Annotations[k]
		same := reflect.DeepEqual(got, v)
		if gt, ok := got.(time.Time); ok {
			same = gt.Equal(v.(time.Time)) // decoded in the local zone
		}
		if reflect.TypeOf(got) != reflect.TypeOf(v) || !same {
			t.Errorf("annotation %s = %#v (%T), want %#v (%T)", k, got, got, v, v)
		}
	}
	if tok, ok := m.DeliveryAnnotations["x-opt-lock-token"].(goamqp.UUID); !ok || tok != goamqp.UUID(rm.LockToken) {
		t.Errorf("lock token annotation %#v", m.DeliveryAnnotations["x-opt-lock-token"])
	}
	// The header counts earlier deliveries; the SDK adds one.
	if m.Header.DeliveryCount != 2 {
		t.Errorf("header delivery count %d, want 2", m.Header.DeliveryCount)
	}
	if m.ApplicationProperties["DeadLetterReason"] != "r" || m.ApplicationProperties["DeadLetterErrorDescription"] != "d" || m.ApplicationProperties["n"] != int64(5) {
		t.Errorf("application properties %v", m.ApplicationProperties)
	}
}

func TestTimeToLiveBeyondTheHeaderIsLeftOut(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		time.Hour:                    time.Hour,
		time.Duration(math.MaxInt64): 0, // unlimited
		time.Duration(math.MaxUint32+1) * time.Millisecond: 0,
	} {
		b, err := fromReceived(&client.ReceivedMessage{Body: []byte("b"), TimeToLive: ttl}, false).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var m goamqp.Message
		if err := m.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if m.Header.TTL != want {
			t.Errorf("time to live %v arrived as %v, want %v", ttl, m.Header.TTL, want)
		}
	}
}

func TestLockTokenTagIsDotNetGUIDOrder(t *testing.T) {
	token := [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	tag := dotNetGUID(token)
	want := []byte{3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15}
	if !reflect.DeepEqual(tag, want) {
		t.Fatalf("tag % x, want % x", tag, want)
	}
	if back := dotNetGUID([16]byte(tag)); !reflect.DeepEqual(back, token[:]) {
		t.Fatalf("the conversion is not its own inverse: % x", back)
	}
}

func TestSentMessageConversion(t *testing.T) {
	sched := time.UnixMilli(1_800_000_000_000).UTC()
	gid := "session-1"
	in := &goamqp.Message{
		Data:       [][]byte{[]byte("body")},
		Header:     &goamqp.MessageHeader{TTL: time.Minute},
		Properties: &goamqp.MessageProperties{MessageID: goamqp.UUID{1}, GroupID: &gid},
		Annotations: goamqp.Annotations{
			goamqp.Symbol("x-opt-partition-key"):          "session-1",
			goamqp.Symbol("x-opt-scheduled-enqueue-time"): sched,
		},
		ApplicationProperties: map[string]any{"i32": int32(1), "u8": uint8(2), "f": float32(0.5), "s": "x",
			"i8": int8(-1), "i16": int16(-2), "u16": uint16(3), "u32": uint32(4), "u64": uint64(math.MaxUint64), "sym": goamqp.Symbol("y")},
	}
	b, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := decodeSent(&amqp.Delivery{Payload: b})
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[0]
	if string(m.Body) != "body" || m.SessionID != gid || m.PartitionKey != gid || m.MessageID != (goamqp.UUID{1}).String() ||
		m.TimeToLive == nil || *m.TimeToLive != time.Minute || m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(sched) {
		t.Fatalf("converted %+v", m)
	}
	// Each number keeps its AMQP type; a symbol becomes a string.
	wantProps := map[string]any{"i32": int32(1), "u8": uint8(2), "f": float32(0.5), "s": "x",
		"i8": int8(-1), "i16": int16(-2), "u16": uint16(3), "u32": uint32(4), "u64": uint64(math.MaxUint64), "sym": "y"}
	if !reflect.DeepEqual(m.ApplicationProperties, wantProps) {
		t.Fatalf("properties %v, want %v", m.ApplicationProperties, wantProps)
	}

	// A body the broker cannot store is refused, not mangled.
	v, _ := (&goamqp.Message{Value: "text"}).MarshalBinary()
	if _, err := decodeSent(&amqp.Delivery{Payload: v}); err == nil {
		t.Fatal("an amqp-value body was accepted")
	}
}

func TestBatchDeliveryCarriesEachMessage(t *testing.T) {
	var data [][]byte
	for _, body := range []string{"a", "b"} {
		b, err := goamqp.NewMessage([]byte(body)).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	outer, err := (&goamqp.Message{Data: data}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := decodeSent(&amqp.Delivery{Payload: outer, Format: batchFormat})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || string(msgs[0].Body) != "a" || string(msgs[1].Body) != "b" {
		t.Fatalf("batch gave %d messages", len(msgs))
	}
}
