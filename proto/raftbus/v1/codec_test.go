package raftbusv1_test

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// hotPath are messages Codec encodes and decodes with the generated code,
// filled in every kind of field they have.
func hotPath() []proto.Message {
	msg := &raftbusv1.Message{
		MessageId: "m-1", SessionId: "s", Subject: "hello", Body: []byte("body \x00\xff"),
		TimeToLive:            durationpb.New(90e9),
		ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: -7}}},
	}
	return []proto.Message{
		&raftv1.AppendEntriesPipelineRequest{Request: &raftv1.AppendEntriesRequest{
			Header: &raftv1.RPCHeader{Id: []byte("n1"), Addr: []byte("127.0.0.1:1")}, Term: 3, PrevLogEntry: 41, PrevLogTerm: 2, LeaderCommitIndex: 40,
			Entries: []*raftv1.Log{{Index: 42, Term: 3, Data: make([]byte, 70<<10)}, {Index: 43, Term: 3, Extensions: []byte{1}}},
		}},
		&raftv1.AppendEntriesPipelineResponse{Response: &raftv1.AppendEntriesResponse{Term: 3, LastLog: 43, Success: true}},
		&raftbusv1.SendEachRequest{EntityPath: "q", Messages: []*raftbusv1.PartitionedMessage{{Message: msg, PartitionId: 3, AnyPartition: true}}},
		&raftbusv1.ReceiveResponse{Messages: []*raftbusv1.ReceivedMessage{{
			Message: msg, SequenceNumber: 1 << 48, EnqueuedTime: timestamppb.Now(), LockToken: []byte{9, 9}, DeliveryCount: 2,
		}}},
	}
}

// TestCodecSpeaksProtobuf: what Codec encodes protobuf decodes to the same
// message, and what protobuf encodes Codec decodes to the same message,
// large messages (from gRPC's buffer pool) included.
func TestCodecSpeaksProtobuf(t *testing.T) {
	for _, want := range hotPath() {
		data, err := raftbusv1.Codec.Marshal(want)
		if err != nil {
			t.Fatalf("encode %T: %v", want, err)
		}
		got := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(data.Materialize(), got); err != nil {
			t.Fatalf("protobuf cannot decode what Codec encoded of %T: %v", want, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%T: Codec encoded %v, want %v", want, got, want)
		}
		data.Free()

		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got = want.ProtoReflect().New().Interface()
		if err := raftbusv1.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
			t.Fatalf("Codec cannot decode what protobuf encoded of %T: %v", want, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%T: Codec decoded %v, want %v", want, got, want)
		}
	}
}

// TestCodecChecksWhatClientsSend: a client's request whose strings are not
// UTF-8 is refused, as protobuf refuses it; what nodes answer is decoded
// by the generated decoder, which does not look.
func TestCodecChecksWhatClientsSend(t *testing.T) {
	// Field 1 of both, a string, holding a byte that is not UTF-8.
	notUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "q\xff")
	if err := raftbusv1.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(notUTF8)}, &raftbusv1.SendEachRequest{}); err == nil {
		t.Fatal("a send whose entity path is not UTF-8 was decoded")
	}
	var answer raftv1.HeartbeatsResponse
	if err := raftbusv1.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(protowire.AppendTag(nil, 2, protowire.VarintType))}, &answer); err == nil {
		t.Fatal("a truncated message was decoded")
	}
	var rm raftbusv1.Message
	if err := raftbusv1.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(notUTF8)}, &rm); err != nil {
		t.Fatalf("a message inside an answer was checked by protobuf's decoder: %v", err)
	}
}
