package engine

import (
	"errors"
	"math"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// applicationPropertiesField is the field number of
// raftbus.v1.Message.application_properties.
const applicationPropertiesField = 13

var errPropertyNotUTF8 = errors.New("application property is not valid UTF-8")

// appendProperties appends application properties to an encoded
// raftbus.v1.Message as map entries in key order. It does by hand what a
// deterministic proto.Marshal does through reflection (sorting every map it
// meets), which dominated the cost of storing a message with properties.
func appendProperties(b []byte, props map[string]*raftbusv1.PropertyValue) ([]byte, error) {
	var buf [16]string
	keys := buf[:0]
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !utf8.ValidString(k) {
			return nil, errPropertyNotUTF8
		}
		v := props[k]
		vn, err := propertyValueSize(v)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, applicationPropertiesField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(len(k))+1+protowire.SizeBytes(vn)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(vn))
		b = appendPropertyValue(b, v)
	}
	return b, nil
}

// propertyValueSize is the encoded size of v (see appendPropertyValue).
func propertyValueSize(v *raftbusv1.PropertyValue) (int, error) {
	switch x := v.GetValue().(type) {
	case *raftbusv1.PropertyValue_StringValue:
		if !utf8.ValidString(x.StringValue) {
			return 0, errPropertyNotUTF8
		}
		return 1 + protowire.SizeBytes(len(x.StringValue)), nil
	case *raftbusv1.PropertyValue_IntValue:
		return 1 + protowire.SizeVarint(uint64(x.IntValue)), nil
	case *raftbusv1.PropertyValue_DoubleValue:
		return 1 + 8, nil
	case *raftbusv1.PropertyValue_BoolValue:
		return 1 + 1, nil
	case *raftbusv1.PropertyValue_BytesValue:
		return 1 + protowire.SizeBytes(len(x.BytesValue)), nil
	case *raftbusv1.PropertyValue_TimestampValue:
		return 1 + protowire.SizeBytes(timestampSize(x.TimestampValue.GetSeconds(), x.TimestampValue.GetNanos())), nil
	case *raftbusv1.PropertyValue_Int32Value:
		return 1 + protowire.SizeVarint(uint64(int64(x.Int32Value))), nil
	case *raftbusv1.PropertyValue_Uint32Value:
		return 1 + protowire.SizeVarint(uint64(x.Uint32Value)), nil
	case *raftbusv1.PropertyValue_Uint64Value:
		return 1 + protowire.SizeVarint(x.Uint64Value), nil
	case *raftbusv1.PropertyValue_FloatValue:
		return 1 + 4, nil
	case *raftbusv1.PropertyValue_Int16Value:
		return 1 + protowire.SizeVarint(uint64(int64(x.Int16Value))), nil
	case *raftbusv1.PropertyValue_Int8Value:
		return 1 + protowire.SizeVarint(uint64(int64(x.Int8Value))), nil
	case *raftbusv1.PropertyValue_Uint16Value:
		return 1 + protowire.SizeVarint(uint64(x.Uint16Value)), nil
	case *raftbusv1.PropertyValue_Uint8Value:
		return 1 + protowire.SizeVarint(uint64(x.Uint8Value)), nil
	}
	return 0, nil
}

func timestampSize(sec int64, nsec int32) int {
	n := 0
	if sec != 0 {
		n += 1 + protowire.SizeVarint(uint64(sec))
	}
	if nsec != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(nsec)))
	}
	return n
}

// appendPropertyValue encodes v as raftbus.v1.PropertyValue: one field of
// its oneof, present even when zero.
func appendPropertyValue(b []byte, v *raftbusv1.PropertyValue) []byte {
	switch x := v.GetValue().(type) {
	case *raftbusv1.PropertyValue_StringValue:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, x.StringValue)
	case *raftbusv1.PropertyValue_IntValue:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(x.IntValue))
	case *raftbusv1.PropertyValue_DoubleValue:
		b = protowire.AppendTag(b, 3, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(x.DoubleValue))
	case *raftbusv1.PropertyValue_BoolValue:
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(x.BoolValue))
	case *raftbusv1.PropertyValue_BytesValue:
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, x.BytesValue)
	case *raftbusv1.PropertyValue_TimestampValue:
		sec, nsec := x.TimestampValue.GetSeconds(), x.TimestampValue.GetNanos()
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(timestampSize(sec, nsec)))
		if sec != 0 {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(sec))
		}
		if nsec != 0 {
			b = protowire.AppendTag(b, 2, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(int64(nsec)))
		}
	case *raftbusv1.PropertyValue_Int32Value:
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(x.Int32Value)))
	case *raftbusv1.PropertyValue_Uint32Value:
		b = protowire.AppendTag(b, 8, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(x.Uint32Value))
	case *raftbusv1.PropertyValue_Uint64Value:
		b = protowire.AppendTag(b, 9, protowire.VarintType)
		b = protowire.AppendVarint(b, x.Uint64Value)
	case *raftbusv1.PropertyValue_FloatValue:
		b = protowire.AppendTag(b, 10, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(x.FloatValue))
	case *raftbusv1.PropertyValue_Int16Value:
		b = protowire.AppendTag(b, 11, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(x.Int16Value)))
	case *raftbusv1.PropertyValue_Int8Value:
		b = protowire.AppendTag(b, 12, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(x.Int8Value)))
	case *raftbusv1.PropertyValue_Uint16Value:
		b = protowire.AppendTag(b, 13, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(x.Uint16Value))
	case *raftbusv1.PropertyValue_Uint8Value:
		b = protowire.AppendTag(b, 14, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(x.Uint8Value))
	}
	return b
}
