package client_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
)

// propertyTypes are application properties of every Go type the SDK
// takes, with values at the edges of their ranges.
func propertyTypes() map[string]any {
	return map[string]any{
		"string": "s", "bool": true, "bytes": []byte{0, 1, 2},
		"time": time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		"int8": int8(math.MinInt8), "int16": int16(math.MinInt16), "int32": int32(math.MinInt32), "int64": int64(math.MinInt64),
		"uint8": uint8(math.MaxUint8), "uint16": uint16(math.MaxUint16), "uint32": uint32(math.MaxUint32), "uint64": uint64(math.MaxUint64),
		"float32": float32(0.1), "float64": 0.1,
	}
}

// checkPropertyTypes fails unless got holds want's properties with the same
// Go types and values.
func checkPropertyTypes(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("property %s missing", k)
			continue
		}
		if reflect.TypeOf(g) != reflect.TypeOf(w) {
			t.Errorf("property %s: %T %v, want %T %v", k, g, g, w, w)
			continue
		}
		switch w := w.(type) {
		case []byte:
			if !bytes.Equal(g.([]byte), w) {
				t.Errorf("property %s: %v, want %v", k, g, w)
			}
		case time.Time:
			if !g.(time.Time).Equal(w) {
				t.Errorf("property %s: %v, want %v", k, g, w)
			}
		default:
			if g != w {
				t.Errorf("property %s: %v, want %v", k, g, w)
			}
		}
	}
}

// testPropertyTypes sends a property of each type and receives it back with
// its type, through the engine's storage and a peek; SQL and correlation
// filters compare the narrower numbers by value.
func (e *env) testPropertyTypes(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("typed", nil)
	want := propertyTypes()
	if err := e.sender("typed").SendMessage(ctx, &client.Message{Body: []byte("typed"), ApplicationProperties: want}, nil); err != nil {
		t.Fatal(err)
	}
	// An int and a uint have no fixed width: they come back as int64 and
	// uint64.
	if err := e.sender("typed").SendMessage(ctx, &client.Message{Body: []byte("untyped"),
		ApplicationProperties: map[string]any{"int": 5, "uint": uint(5)}}, nil); err != nil {
		t.Fatal(err)
	}
	r := e.receiver("typed", nil)
	got := receiveN(t, ctx, r, 2)
	for _, m := range got {
		switch string(m.Body) {
		case "typed":
			checkPropertyTypes(t, m.ApplicationProperties, want)
		default:
			checkPropertyTypes(t, m.ApplicationProperties, map[string]any{"int": int64(5), "uint": uint64(5)})
		}
	}

	if _, err := e.admin.CreateTopic(ctx, "typed-events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CreateSubscription(ctx, "typed-events", "five", nil, sqlRule("five",
		"i32 = 5 AND i16 = 5 AND i8 = 5.0 AND u8 = 5 AND u16 < 6 AND u32 >= 5 AND u64 = 5 AND f32 = 5 AND i32 + u64 = 10 AND i32 = f32")); err != nil {
		t.Fatal(err)
	}
	s := e.sender("typed-events")
	for _, n := range []int{5, 6} {
		props := map[string]any{"n": int64(n), "i32": int32(n), "i16": int16(n), "i8": int8(n), "u8": uint8(n),
			"u16": uint16(n), "u32": uint32(n), "u64": uint64(n), "f32": float32(n)}
		if err := s.SendMessage(ctx, &client.Message{Body: []byte("typed"), ApplicationProperties: props}, nil); err != nil {
			t.Fatal(err)
		}
	}
	five, err := e.c.NewReceiverForSubscription("typed-events", "five", nil)
	if err != nil {
		t.Fatal(err)
	}
	got = receiveN(t, ctx, five, 1)
	if n := got[0].ApplicationProperties["n"]; n != int64(5) {
		t.Fatalf("subscription five got n = %v", n)
	}
	if _, ok := got[0].ApplicationProperties["i32"].(int32); !ok {
		t.Fatalf("i32 came back a %T", got[0].ApplicationProperties["i32"])
	}
	more, err := five.ReceiveMessages(ctx, 10, &client.ReceiveMessagesOptions{MaxWaitTime: 500 * time.Millisecond})
	if err != nil || len(more) != 0 {
		t.Fatalf("subscription five also got %d messages (%v)", len(more), err)
	}
}
