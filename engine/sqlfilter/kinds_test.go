package sqlfilter

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// narrowKinds are property values of the kinds beyond int64 and float64,
// each with the Kind filters see it as.
var narrowKinds = []struct {
	name string
	pv   *raftbusv1.PropertyValue
	kind Kind
}{
	{"int32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: math.MinInt32}}, KindInt},
	{"int16", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int16Value{Int16Value: math.MinInt16}}, KindInt},
	{"int8", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int8Value{Int8Value: -5}}, KindInt},
	{"uint32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint32Value{Uint32Value: math.MaxUint32}}, KindInt},
	{"uint16", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint16Value{Uint16Value: math.MaxUint16}}, KindInt},
	{"uint8", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint8Value{Uint8Value: 5}}, KindInt},
	{"uint64", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint64Value{Uint64Value: 7}}, KindInt},
	{"uint64 beyond int64", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint64Value{Uint64Value: math.MaxUint64}}, KindFloat},
	{"float32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_FloatValue{FloatValue: 0.1}}, KindFloat},
}

// TestNarrowKindsRoundTrip: ValueOf and PropertyValue give back the kind
// and value a property was stored with, which is what keeps a property's
// type when a rule action copies it.
func TestNarrowKindsRoundTrip(t *testing.T) {
	for _, tc := range narrowKinds {
		v := ValueOf(tc.pv)
		if v.Kind() != tc.kind {
			t.Errorf("%s: kind %v, want %v", tc.name, v.Kind(), tc.kind)
		}
		if back := v.PropertyValue(); !proto.Equal(back, tc.pv) {
			t.Errorf("%s: back as %v, want %v", tc.name, back, tc.pv)
		}
	}
	if pv := Null().PropertyValue(); pv != nil {
		t.Errorf("null: %v, want nil", pv)
	}
	if u, ok := ValueOf(narrowKinds[7].pv).Uint64(); !ok || u != math.MaxUint64 {
		t.Errorf("Uint64() = %d, %v", u, ok)
	}
}

// narrowMessage has a property of each narrower kind, all 5 but for the
// ones named big.
func narrowMessage() *testMessage {
	return &testMessage{user: map[string]Value{
		"i32": Int32Value(5), "i16": Int16Value(5), "i8": Int8Value(5),
		"u32": Uint32Value(5), "u16": Uint16Value(5), "u8": Uint8Value(5), "u64": Uint64Value(5),
		"f32": Float32Value(5), "f32tenth": Float32Value(0.1), "i64": IntValue(5), "f64": FloatValue(5),
		"bigu64": Uint64Value(math.MaxUint64), "bigu64less": Uint64Value(math.MaxUint64 - 1),
		"maxu32": Uint32Value(math.MaxUint32), "minus8": Int8Value(-8),
	}}
}

// TestMatchNarrowKinds: filters compare the narrower numbers by value, with
// one another, with int64 and float64 properties and with literals, as
// Service Bus promotes them.
func TestMatchNarrowKinds(t *testing.T) {
	m := narrowMessage()
	for _, tc := range []struct {
		expr string
		want result
	}{
		{"i32 = 5", yes}, {"i16 = 5", yes}, {"i8 = 5", yes}, {"u32 = 5", yes}, {"u16 = 5", yes}, {"u8 = 5", yes}, {"u64 = 5", yes},
		{"f32 = 5", yes}, {"f32 = 5.0", yes}, {"i32 = 5.0", yes}, {"i32 = 6", no}, {"i32 <> 5", no},
		{"i32 > 4 AND i16 < 6 AND i8 >= 5 AND u8 <= 5 AND u16 <> 4", yes},
		{"i32 IN (1, 5)", yes}, {"u8 IN (1, 2)", no},
		// Across kinds.
		{"i32 = i16 AND i16 = i8 AND i8 = u8 AND u8 = u16 AND u16 = u32 AND u32 = u64 AND u64 = i64 AND i64 = f32 AND f32 = f64", yes},
		{"i32 < maxu32", yes}, {"minus8 < u8", yes}, {"minus8 = -8", yes},
		// Arithmetic gives int64 (or float64) results.
		{"i32 + u64 = 10", yes}, {"i8 * u16 = 25", yes}, {"maxu32 + 1 = 4294967296", yes}, {"-minus8 = u16 + 3", yes},
		{"f32 / 2 = 2.5", yes},
		// A float32 is the float64 of the same number: 0.1f is not 0.1,
		// as in Service Bus, which promotes a float to a double.
		{"f32tenth = 0.1", no}, {"f32tenth > 0.1", yes}, {"f32tenth < 0.11", yes},
		// A uint64 beyond int64 compares as a float64, and exactly with
		// another uint64.
		{"bigu64 > 9223372036854775807", yes}, {"bigu64 > 1.0E19", yes}, {"bigu64 > i64", yes},
		{"bigu64 > bigu64less", yes}, {"bigu64less < bigu64", yes}, {"bigu64 = bigu64less", no}, {"bigu64 = bigu64", yes},
		// Not strings.
		{"i32 = '5'", fails},
	} {
		checkMatch(t, tc.expr, nil, m, tc.want, nil)
	}
}

// TestNarrowKindParameters: a filter parameter of a narrower kind compares
// by value too.
func TestNarrowKindParameters(t *testing.T) {
	params := map[string]*raftbusv1.PropertyValue{
		"five": {Value: &raftbusv1.PropertyValue_Int16Value{Int16Value: 5}},
		"half": {Value: &raftbusv1.PropertyValue_FloatValue{FloatValue: 0.5}},
	}
	m := narrowMessage()
	checkMatch(t, "i64 = @five AND u8 = @five", params, m, yes, nil)
	checkMatch(t, "f64 * @half = 2.5", params, m, yes, nil)
}

// TestActionKeepsNarrowKinds: SET copying a property keeps its type;
// computing a new value makes an int64.
func TestActionKeepsNarrowKinds(t *testing.T) {
	a, err := ParseAction("SET c32 = i32; SET cu8 = u8; SET cf32 = f32; SET cbig = bigu64; SET sum = i32 + i8", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := narrowMessage()
	if err := a.Apply(m); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*raftbusv1.PropertyValue{
		"c32":  {Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: 5}},
		"cu8":  {Value: &raftbusv1.PropertyValue_Uint8Value{Uint8Value: 5}},
		"cf32": {Value: &raftbusv1.PropertyValue_FloatValue{FloatValue: 5}},
		"cbig": {Value: &raftbusv1.PropertyValue_Uint64Value{Uint64Value: math.MaxUint64}},
		"sum":  {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 10}},
	} {
		if got := m.user[name].PropertyValue(); !proto.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestCorrelationFilterNarrowKinds: correlation filters compare integers
// of any width by value, and float32 with float64, but still not an
// integer with a float.
func TestCorrelationFilterNarrowKinds(t *testing.T) {
	m := narrowMessage()
	for _, tc := range []struct {
		name string
		prop string
		pv   *raftbusv1.PropertyValue
		want bool
	}{
		{"int32 property, int64 filter", "i32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_IntValue{IntValue: 5}}, true},
		{"int64 property, int32 filter", "i64", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: 5}}, true},
		{"uint8 property, int16 filter", "u8", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int16Value{Int16Value: 5}}, true},
		{"uint64 property, uint64 filter", "bigu64", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint64Value{Uint64Value: math.MaxUint64}}, true},
		{"uint64 properties differ", "bigu64less", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Uint64Value{Uint64Value: math.MaxUint64}}, false},
		{"float32 property, double filter", "f32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 5}}, true},
		{"int32 property, other value", "i32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: 6}}, false},
		{"int32 property, double filter", "i32", &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 5}}, false},
	} {
		c, err := NewCorrelationFilter(&raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{tc.prop: tc.pv}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := c.Match(m); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}
