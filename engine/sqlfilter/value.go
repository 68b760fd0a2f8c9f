package sqlfilter

import (
	"bytes"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Kind is the type of a Value.
type Kind uint8

// The kinds of Value: those of raftbusv1.PropertyValue, and null.
const (
	KindNull Kind = iota
	KindString
	KindInt
	KindFloat
	KindBool
	KindBytes
	KindTime
)

var kindNames = [...]string{
	KindNull:   "null",
	KindString: "string",
	KindInt:    "int64",
	KindFloat:  "float64",
	KindBool:   "bool",
	KindBytes:  "bytes",
	KindTime:   "timestamp",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Origin is the property type a number was read from, when narrower than
// or different from its Kind's int64 or float64. Filters compare numbers by
// value whatever their origin (an int32 property 5 equals the literal 5);
// the origin only lets a rule action that copies a property keep its type.
type Origin uint8

// The origins of numbers. OriginNone is a plain int64 or float64, and that
// of every computed number.
const (
	OriginNone Origin = iota
	OriginInt8
	OriginInt16
	OriginInt32
	OriginUint8
	OriginUint16
	OriginUint32
	OriginUint64
	OriginFloat32
)

// Value is a typed property value. The zero Value is null. A Value is small
// and passed by value; a bytes Value shares the slice it was made from.
type Value struct {
	kind Kind
	orig Origin
	nsec int32   // timestamps: nanoseconds within the second
	i    int64   // ints, bools (0/1), timestamps (Unix seconds)
	f    float64 // floats
	s    string  // strings
	b    []byte  // bytes
}

// Null returns the null Value.
func Null() Value { return Value{} }

// StringValue returns a string Value.
func StringValue(s string) Value { return Value{kind: KindString, s: s} }

// IntValue returns an int64 Value.
func IntValue(i int64) Value { return Value{kind: KindInt, i: i} }

// FloatValue returns a float64 Value.
func FloatValue(f float64) Value { return Value{kind: KindFloat, f: f} }

// Int32Value returns an int64 Value that came from an int32. So do
// Int16Value, Int8Value, Uint32Value, Uint16Value and Uint8Value from their
// types.
func Int32Value(i int32) Value { return Value{kind: KindInt, orig: OriginInt32, i: int64(i)} }

// Int16Value returns an int64 Value that came from an int16.
func Int16Value(i int16) Value { return Value{kind: KindInt, orig: OriginInt16, i: int64(i)} }

// Int8Value returns an int64 Value that came from an int8.
func Int8Value(i int8) Value { return Value{kind: KindInt, orig: OriginInt8, i: int64(i)} }

// Uint32Value returns an int64 Value that came from a uint32.
func Uint32Value(u uint32) Value { return Value{kind: KindInt, orig: OriginUint32, i: int64(u)} }

// Uint16Value returns an int64 Value that came from a uint16.
func Uint16Value(u uint16) Value { return Value{kind: KindInt, orig: OriginUint16, i: int64(u)} }

// Uint8Value returns an int64 Value that came from a uint8.
func Uint8Value(u uint8) Value { return Value{kind: KindInt, orig: OriginUint8, i: int64(u)} }

// Uint64Value returns the Value of a uint64: an int64 Value when u fits
// one, else a float64 Value (the nearest float64, as a ulong above the
// range of long is promoted in Service Bus filters). Either way Uint64
// gives back u exactly.
func Uint64Value(u uint64) Value {
	if u <= math.MaxInt64 {
		return Value{kind: KindInt, orig: OriginUint64, i: int64(u)}
	}
	return Value{kind: KindFloat, orig: OriginUint64, i: int64(u), f: float64(u)}
}

// Float32Value returns a float64 Value that came from a float32: the
// float64 of the same number (so float32(0.1) is not equal to 0.1, as in
// Service Bus).
func Float32Value(f float32) Value { return Value{kind: KindFloat, orig: OriginFloat32, f: float64(f)} }

// BoolValue returns a bool Value.
func BoolValue(b bool) Value {
	v := Value{kind: KindBool}
	if b {
		v.i = 1
	}
	return v
}

// BytesValue returns a bytes Value that shares b.
func BytesValue(b []byte) Value { return Value{kind: KindBytes, b: b} }

// TimeValue returns a timestamp Value for t (time zone dropped).
func TimeValue(t time.Time) Value {
	return Value{kind: KindTime, i: t.Unix(), nsec: int32(t.Nanosecond())}
}

// UnixTimeValue returns a timestamp Value from Unix seconds and
// nanoseconds, the form of google.protobuf.Timestamp.
func UnixTimeValue(sec int64, nsec int32) Value {
	return Value{kind: KindTime, i: sec, nsec: nsec}
}

// DurationValue returns the Value of a duration as filters see it: a
// float64 number of seconds. Message implementations use it for
// sys.TimeToLive.
func DurationValue(d time.Duration) Value { return FloatValue(d.Seconds()) }

// ValueOf converts a PropertyValue. A nil PropertyValue, or one with no
// value set, is null.
func ValueOf(pv *raftbusv1.PropertyValue) Value {
	switch x := pv.GetValue().(type) {
	case *raftbusv1.PropertyValue_StringValue:
		return StringValue(x.StringValue)
	case *raftbusv1.PropertyValue_IntValue:
		return IntValue(x.IntValue)
	case *raftbusv1.PropertyValue_DoubleValue:
		return FloatValue(x.DoubleValue)
	case *raftbusv1.PropertyValue_BoolValue:
		return BoolValue(x.BoolValue)
	case *raftbusv1.PropertyValue_BytesValue:
		return BytesValue(x.BytesValue)
	case *raftbusv1.PropertyValue_TimestampValue:
		ts := x.TimestampValue
		return UnixTimeValue(ts.GetSeconds(), ts.GetNanos())
	case *raftbusv1.PropertyValue_Int32Value:
		return Int32Value(x.Int32Value)
	case *raftbusv1.PropertyValue_Uint32Value:
		return Uint32Value(x.Uint32Value)
	case *raftbusv1.PropertyValue_Uint64Value:
		return Uint64Value(x.Uint64Value)
	case *raftbusv1.PropertyValue_FloatValue:
		return Float32Value(x.FloatValue)
	case *raftbusv1.PropertyValue_Int16Value:
		return Value{kind: KindInt, orig: OriginInt16, i: int64(x.Int16Value)}
	case *raftbusv1.PropertyValue_Int8Value:
		return Value{kind: KindInt, orig: OriginInt8, i: int64(x.Int8Value)}
	case *raftbusv1.PropertyValue_Uint16Value:
		return Value{kind: KindInt, orig: OriginUint16, i: int64(x.Uint16Value)}
	case *raftbusv1.PropertyValue_Uint8Value:
		return Value{kind: KindInt, orig: OriginUint8, i: int64(x.Uint8Value)}
	}
	return Null()
}

// PropertyValue converts a non-null Value back, with the type of its
// origin: ValueOf and PropertyValue round-trip. It returns nil for null.
func (v Value) PropertyValue() *raftbusv1.PropertyValue {
	var pv raftbusv1.PropertyValue
	switch v.kind {
	case KindString:
		pv.Value = &raftbusv1.PropertyValue_StringValue{StringValue: v.s}
	case KindInt:
		switch v.orig {
		case OriginInt32:
			pv.Value = &raftbusv1.PropertyValue_Int32Value{Int32Value: int32(v.i)}
		case OriginInt16:
			pv.Value = &raftbusv1.PropertyValue_Int16Value{Int16Value: int32(v.i)}
		case OriginInt8:
			pv.Value = &raftbusv1.PropertyValue_Int8Value{Int8Value: int32(v.i)}
		case OriginUint32:
			pv.Value = &raftbusv1.PropertyValue_Uint32Value{Uint32Value: uint32(v.i)}
		case OriginUint16:
			pv.Value = &raftbusv1.PropertyValue_Uint16Value{Uint16Value: uint32(v.i)}
		case OriginUint8:
			pv.Value = &raftbusv1.PropertyValue_Uint8Value{Uint8Value: uint32(v.i)}
		case OriginUint64:
			pv.Value = &raftbusv1.PropertyValue_Uint64Value{Uint64Value: uint64(v.i)}
		default:
			pv.Value = &raftbusv1.PropertyValue_IntValue{IntValue: v.i}
		}
	case KindFloat:
		switch v.orig {
		case OriginFloat32:
			pv.Value = &raftbusv1.PropertyValue_FloatValue{FloatValue: float32(v.f)}
		case OriginUint64:
			pv.Value = &raftbusv1.PropertyValue_Uint64Value{Uint64Value: uint64(v.i)}
		default:
			pv.Value = &raftbusv1.PropertyValue_DoubleValue{DoubleValue: v.f}
		}
	case KindBool:
		pv.Value = &raftbusv1.PropertyValue_BoolValue{BoolValue: v.i != 0}
	case KindBytes:
		pv.Value = &raftbusv1.PropertyValue_BytesValue{BytesValue: v.b}
	case KindTime:
		pv.Value = &raftbusv1.PropertyValue_TimestampValue{TimestampValue: &timestamppb.Timestamp{Seconds: v.i, Nanos: v.nsec}}
	default:
		return nil
	}
	return &pv
}

// Kind returns the kind of v.
func (v Value) Kind() Kind { return v.kind }

// Origin returns the property type a number came from; OriginNone for a
// plain int64 or float64 and for everything else.
func (v Value) Origin() Origin { return v.orig }

// Uint64 returns the number of a Value that came from a uint64, exactly.
func (v Value) Uint64() (uint64, bool) { return uint64(v.i), v.orig == OriginUint64 }

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.kind == KindNull }

// Str returns the string of a string Value.
func (v Value) Str() (string, bool) { return v.s, v.kind == KindString }

// Int returns the integer of an int64 Value.
func (v Value) Int() (int64, bool) { return v.i, v.kind == KindInt }

// Float returns the number of a float64 Value.
func (v Value) Float() (float64, bool) { return v.f, v.kind == KindFloat }

// Bool returns the truth of a bool Value.
func (v Value) Bool() (bool, bool) { return v.i != 0, v.kind == KindBool }

// Bytes returns the bytes of a bytes Value (shared, not copied).
func (v Value) Bytes() ([]byte, bool) { return v.b, v.kind == KindBytes }

// Time returns the instant of a timestamp Value, in UTC.
func (v Value) Time() (time.Time, bool) {
	if v.kind != KindTime {
		return time.Time{}, false
	}
	return time.Unix(v.i, int64(v.nsec)).UTC(), true
}

// UnixTime returns the Unix seconds and nanoseconds of a timestamp Value.
func (v Value) UnixTime() (sec int64, nsec int32, ok bool) {
	return v.i, v.nsec, v.kind == KindTime
}

// String formats v for messages and tests; strings are quoted as in SQL.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return quoteString(v.s)
	case KindInt:
		return strconv.FormatInt(v.i, 10)
	case KindFloat:
		if v.orig == OriginUint64 {
			return strconv.FormatUint(uint64(v.i), 10)
		}
		return formatFloat(v.f)
	case KindBool:
		if v.i != 0 {
			return "TRUE"
		}
		return "FALSE"
	case KindBytes:
		return "bytes(" + strconv.Itoa(len(v.b)) + ")"
	case KindTime:
		t, _ := v.Time()
		return t.Format(time.RFC3339Nano)
	}
	return "NULL"
}

// Equal reports typed equality: same kind and same value. Null equals
// nothing, not even null, and NaN equals nothing. This is the equality of
// correlation filters; SQL '=' also promotes int64 to float64. Integers
// of different origins (an int32 and an int64) are both of KindInt and
// equal when their values are, as are float32s and float64s.
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind {
		return false
	}
	if v.orig == OriginUint64 && w.orig == OriginUint64 {
		return v.i == w.i // exact, also above the range of int64
	}
	switch v.kind {
	case KindString:
		return v.s == w.s
	case KindInt, KindBool:
		return v.i == w.i
	case KindFloat:
		return v.f == w.f
	case KindBytes:
		return bytes.Equal(v.b, w.b)
	case KindTime:
		return v.i == w.i && v.nsec == w.nsec
	}
	return false
}

// formatFloat prints f so that it reads back as the same float64 literal:
// always with a decimal point or an exponent.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' || s[i] == 'e' {
			return s
		}
	}
	return s + ".0"
}
