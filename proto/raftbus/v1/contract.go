package raftbusv1

import (
	"hash/fnv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
)

// The rules of the wire that are not in the .proto files: how a key picks
// a partition, how a sequence number names its partition, how a call asks
// not to be forwarded, which failures a retry can get past, and how soon a
// lost connection is tried again. The SDK, the nodes and the engine all
// take them from here, so that they cannot drift apart.

// ForwardMetadataKey set to NeverForward in a call's gRPC metadata asks a
// node to serve the call only if it leads the partition (or metadata
// group) concerned, and to answer NOT_LEADER with the leader's address
// otherwise. Nodes set it on the calls they forward, so a call travels at
// most one hop; clients that route by themselves set it too.
const (
	ForwardMetadataKey = "raftbus-forward"
	NeverForward       = "never"
)

// PartitionForKey is the partition of a session id, partition key or
// message id: FNV-1a (32 bit) of the key modulo the partition count.
func PartitionForKey(key string, partitions uint32) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32() % partitions
}

// SequenceCounterBits is how many low bits of a partitioned entity's
// sequence number count its messages; the partition id fills the 16 bits
// above them. An entity of one partition counts with all 63 bits.
const SequenceCounterBits = 48

// SequenceNumber is the sequence number the counter value n gets in
// partition p of a partitioned entity (n wraps at 2^48).
func SequenceNumber(p uint32, n uint64) int64 {
	return int64(uint64(p)<<SequenceCounterBits | n&(1<<SequenceCounterBits-1))
}

// PartitionOfSequence is the partition a sequence number of a partitioned
// entity belongs to.
func PartitionOfSequence(seq int64) uint32 { return uint32(uint64(seq) >> SequenceCounterBits) }

// Retryable reports whether an operation that failed with r may succeed
// when repeated unchanged (at the leader, after a backoff, or once a lock
// frees).
func (r ErrorReason) Retryable() bool {
	switch r {
	case ErrorReason_ERROR_REASON_NOT_LEADER,
		ErrorReason_ERROR_REASON_SERVER_BUSY,
		ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
		ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED,
		ErrorReason_ERROR_REASON_QUOTA_EXCEEDED:
		return true
	}
	return false
}

// StreamWindow and ConnWindow are the HTTP/2 flow-control windows of
// every connection to or between nodes, on both ends. Fixed windows turn
// off gRPC's bandwidth estimation, which answers data with PING frames:
// on a connection of small requests and answers that is a write and a
// read more per message on each end.
const (
	StreamWindow = 4 << 20
	ConnWindow   = 16 << 20
)

// DialOptions are the options every client of a node dials with, the
// SDK's and the nodes' own: Codec, the flow-control windows above, and a
// reconnect backoff capped at a second (gRPC's default grows to two
// minutes; a node that was restarted must be used again within a second).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithInitialWindowSize(StreamWindow),
		grpc.WithInitialConnWindowSize(ConnWindow),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec)),
	}
}

// StatusCode is the gRPC status code that goes with a reason (listed next
// to each reason in errors.proto).
func (r ErrorReason) StatusCode() codes.Code {
	switch r {
	case ErrorReason_ERROR_REASON_NOT_FOUND:
		return codes.NotFound
	case ErrorReason_ERROR_REASON_ALREADY_EXISTS:
		return codes.AlreadyExists
	case ErrorReason_ERROR_REASON_INVALID_ARGUMENT, ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED:
		return codes.InvalidArgument
	case ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST, ErrorReason_ERROR_REASON_SESSION_LOCK_LOST,
		ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED:
		return codes.FailedPrecondition
	case ErrorReason_ERROR_REASON_QUOTA_EXCEEDED:
		return codes.ResourceExhausted
	case ErrorReason_ERROR_REASON_NOT_LEADER, ErrorReason_ERROR_REASON_SERVER_BUSY,
		ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
		return codes.Unavailable
	case ErrorReason_ERROR_REASON_UNAUTHORIZED:
		return codes.PermissionDenied
	}
	return codes.Internal
}
