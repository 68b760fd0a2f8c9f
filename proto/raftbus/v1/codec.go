package raftbusv1

import (
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Codec encodes and decodes the messages of every connection to and
// between nodes: gRPC's protobuf codec, except that the messages of the
// hot path (Raft's traffic between nodes, sends, receives and
// settlements; see buf.gen.yaml) go through their generated encoders and
// decoders instead of protobuf's reflection. On a node under load
// protobuf's reflection cost about an eighth of its CPU (at 16 partitions
// 14 µs of about 100 a message), most of it in Raft's AppendEntries and
// in receives.
//
// The bytes on the wire are the same either way. What differs is that
// the generated decoder does not check that strings are UTF-8, so what a
// client sends a node (a request of this package) is still decoded by
// protobuf: a node takes no string it has not checked. What nodes send
// each other and what a node answers was checked when it came in.
var Codec encoding.CodecV2 = codec{fallback: encoding.GetCodecV2(protocodec.Name)}

// ServerCodec is the server option that makes a server use Codec.
func ServerCodec() grpc.ServerOption { return grpc.ForceServerCodecV2(Codec) }

type codec struct{ fallback encoding.CodecV2 }

// generatedEncoder is what protoc-gen-go-vtproto generates with the
// marshal and size features.
type generatedEncoder interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
}

// generatedDecoder is what protoc-gen-go-vtproto generates with the
// unmarshal feature.
type generatedDecoder interface {
	UnmarshalVT(dAtA []byte) error
}

func (c codec) Name() string { return protocodec.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(generatedEncoder)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(buf); err != nil {
			return nil, fmt.Errorf("encode %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(generatedDecoder)
	if !ok || fromClients(v) {
		return c.fallback.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	// The generated decoder copies what it keeps (it does not decode
	// unsafely), so buf can go back to the pool.
	return m.UnmarshalVT(buf.ReadOnlyData())
}

// fromClients reports whether v is a request of the client API, which
// protobuf's decoder decodes (see Codec).
func fromClients(v any) bool {
	m, ok := v.(proto.Message)
	if !ok {
		return true
	}
	name := m.ProtoReflect().Descriptor().FullName()
	return name.Parent() == "raftbus.v1" && strings.HasSuffix(string(name.Name()), "Request")
}
