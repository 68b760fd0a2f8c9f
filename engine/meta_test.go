package engine

import (
	"bytes"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestApplicationPropertiesEncodeAsDeterministicProtobuf(t *testing.T) {
	props := map[string]*raftbusv1.PropertyValue{
		"":         {Value: &raftbusv1.PropertyValue_StringValue{StringValue: ""}},
		"s":        {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "größe"}},
		"zero":     {Value: &raftbusv1.PropertyValue_IntValue{}},
		"negative": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: math.MinInt64}},
		"double":   {Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: -0.5}},
		"nan":      {Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: math.NaN()}},
		"false":    {Value: &raftbusv1.PropertyValue_BoolValue{}},
		"true":     {Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}},
		"bytes":    {Value: &raftbusv1.PropertyValue_BytesValue{BytesValue: []byte{0, 1}}},
		"nobytes":  {Value: &raftbusv1.PropertyValue_BytesValue{}},
		"epoch":    {Value: &raftbusv1.PropertyValue_TimestampValue{TimestampValue: &timestamppb.Timestamp{}}},
		"before":   {Value: &raftbusv1.PropertyValue_TimestampValue{TimestampValue: &timestamppb.Timestamp{Seconds: -5, Nanos: 999_999_999}}},
		"unset":    {},
		"nil":      nil,
		"int32":    {Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: math.MinInt32}},
		"int32+":   {Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: 300}},
		"int32 0":  {Value: &raftbusv1.PropertyValue_Int32Value{}},
		"uint32":   {Value: &raftbusv1.PropertyValue_Uint32Value{Uint32Value: math.MaxUint32}},
		"uint64":   {Value: &raftbusv1.PropertyValue_Uint64Value{Uint64Value: math.MaxUint64}},
		"uint64 0": {Value: &raftbusv1.PropertyValue_Uint64Value{}},
		"float":    {Value: &raftbusv1.PropertyValue_FloatValue{FloatValue: -0.1}},
		"float 0":  {Value: &raftbusv1.PropertyValue_FloatValue{}},
		"int16":    {Value: &raftbusv1.PropertyValue_Int16Value{Int16Value: math.MinInt16}},
		"int8":     {Value: &raftbusv1.PropertyValue_Int8Value{Int8Value: -1}},
		"uint16":   {Value: &raftbusv1.PropertyValue_Uint16Value{Uint16Value: math.MaxUint16}},
		"uint8":    {Value: &raftbusv1.PropertyValue_Uint8Value{Uint8Value: math.MaxUint8}},
		"uint8 0":  {Value: &raftbusv1.PropertyValue_Uint8Value{}},
	}
	for _, m := range []*raftbusv1.Message{
		{ApplicationProperties: props},
		{ContentType: "ct", CorrelationId: "c", Subject: "s", To: "t", ReplyTo: "r", ReplyToSessionId: "rs", SessionId: "sid", PartitionKey: "sid",
			TimeToLive: dur(5), ScheduledEnqueueTime: timestamp(startMs), ApplicationProperties: props},
		{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"one": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 300}}}},
	} {
		got, err := encodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := deterministic.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			decoded := &raftbusv1.Message{}
			if err := proto.Unmarshal(got, decoded); err != nil {
				t.Fatalf("encoding does not decode: %v", err)
			}
			t.Fatalf("encoding differs from proto's deterministic one:\n got %x\nwant %x\ndecodes as %v", got, want, decoded)
		}
	}
	if _, err := encodeMeta(&raftbusv1.Message{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"\xff": {}}}); err == nil {
		t.Fatal("a key that is not UTF-8 was encoded")
	}
	if _, err := encodeMeta(&raftbusv1.Message{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "\xff"}}}}); err == nil {
		t.Fatal("a value that is not UTF-8 was encoded")
	}
}
