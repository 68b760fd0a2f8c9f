package sqlfilter

import (
	"bytes"
	"math"
	"strconv"
	"time"

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

// Value is a typed property value. The zero Value is null. A Value is small
// and passed by value; a bytes Value shares the slice it was made from.
type Value struct {
	kind Kind
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
	}
	return Null()
}

// Kind returns the kind of v.
func (v Value) Kind() Kind { return v.kind }

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
// correlation filters; SQL '=' also promotes int64 to float64.
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind {
		return false
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
