package azsdk

import (
	"bytes"
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// typedProperties are application properties of each type the SDK sends
// as a distinct AMQP type (int8 a byte, uint8 a ubyte, int16 a short, ...),
// with values at the edges of their ranges.
func typedProperties() map[string]any {
	return map[string]any{
		"int32": int32(math.MinInt32), "int16": int16(math.MinInt16), "int8": int8(math.MinInt8),
		"uint8": uint8(math.MaxUint8), "uint16": uint16(math.MaxUint16), "uint32": uint32(math.MaxUint32),
		"uint64": uint64(math.MaxUint64), "float32": float32(0.1), "float64": 0.1, "int64": int64(math.MinInt64),
		"bool": true, "string": "größe", "bytes": []byte{0, 1, 0xff},
		// AMQP timestamps are milliseconds.
		"time": time.Date(2026, 5, 6, 7, 8, 9, 10_000_000, time.UTC),
	}
}

// checkTyped fails unless got holds each of want's properties with the
// same Go type and value: the SDK and applications type-assert them.
func checkTyped(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: property %s missing", what, k)
			continue
		}
		if reflect.TypeOf(g) != reflect.TypeOf(w) {
			t.Errorf("%s: property %s came back %T %v, want %T %v", what, k, g, g, w, w)
			continue
		}
		var equal bool
		switch w := w.(type) {
		case []byte:
			equal = bytes.Equal(g.([]byte), w)
		case time.Time:
			equal = g.(time.Time).Equal(w)
		default:
			equal = g == w
		}
		if !equal {
			t.Errorf("%s: property %s = %v, want %v", what, k, g, w)
		}
	}
}

// testPropertyTypes: application properties keep their types through
// send, receive, peek and abandon with properties to modify, and filters
// compare the narrower numbers by value.
func testPropertyTypes(t *testing.T, b *broker) {
	ctx := testContext(t)
	q := b.queue(t, "typed")
	want := typedProperties()
	if err := b.sender(t, q).SendMessage(ctx, &azservicebus.Message{Body: []byte("typed"), ApplicationProperties: want}, nil); err != nil {
		t.Fatal(err)
	}
	r := b.receiver(t, q, nil)
	peeked, err := r.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))})
	if err != nil || len(peeked) != 1 {
		t.Fatalf("peek: %d messages, %v", len(peeked), err)
	}
	checkTyped(t, "peeked", peeked[0].ApplicationProperties, want)
	m := receiveOne(t, ctx, r)
	checkTyped(t, "received", m.ApplicationProperties, want)
	modified := map[string]any{"short": int16(-3), "uint": uint32(9), "float": float32(1.5)}
	if err := r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: modified}); err != nil {
		t.Fatal(err)
	}
	again := receiveOne(t, ctx, r)
	checkTyped(t, "abandoned and received again", again.ApplicationProperties, want)
	checkTyped(t, "modified on abandon", again.ApplicationProperties, modified)
	if err := r.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatal(err)
	}

	if _, err := b.admin.CreateTopic(ctx, "typed-events", nil); err != nil {
		t.Fatal(err)
	}
	rule := &admin.RuleProperties{Name: "five", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{
		SqlFilter: &raftbusv1.SqlFilter{SqlExpression: "i32 = 5 AND i16 = 5 AND i8 = 5 AND u8 = 5 AND u16 = 5 AND u32 = 5 AND u64 = 5 AND f32 = 5.0 AND i32 + u8 = 10"}}}}
	if _, err := b.admin.CreateSubscription(ctx, "typed-events", "five", nil, rule); err != nil {
		t.Fatal(err)
	}
	s := b.sender(t, "typed-events")
	for _, n := range []int{6, 5} {
		err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte{byte(n)}, ApplicationProperties: map[string]any{
			"i32": int32(n), "i16": int16(n), "i8": int8(n), "u8": uint8(n), "u16": uint16(n), "u32": uint32(n),
			"u64": uint64(n), "f32": float32(n)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	sr, err := b.sb.NewReceiverForSubscription("typed-events", "five", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	got := receiveOne(t, ctx, sr)
	if !bytes.Equal(got.Body, []byte{5}) {
		t.Fatalf("the subscription got message %v, want 5", got.Body)
	}
	checkTyped(t, "filtered", got.ApplicationProperties, map[string]any{"i32": int32(5), "u8": uint8(5), "f32": float32(5)})
	if left, err := sr.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))}); err != nil || len(left) != 1 {
		t.Fatalf("subscription holds %d messages (%v), want only the one received", len(left), err)
	}
}
