package raftbusv1_test

import (
	"testing"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Known values: a change here moves messages to other partitions or
// misreads stored sequence numbers.
func TestContractValues(t *testing.T) {
	// FNV-1a 32 of "" is the offset basis 2166136261; of "a" 0xe40c292c;
	// of "foobar" 0xbf9cf968.
	for _, c := range []struct {
		key  string
		n    uint32
		want uint32
	}{
		{"", 1000, 2166136261 % 1000},
		{"a", 7, 0xe40c292c % 7},
		{"foobar", 16, 0xbf9cf968 % 16},
		{"anything", 1, 0},
	} {
		if got := raftbusv1.PartitionForKey(c.key, c.n); got != c.want {
			t.Errorf("PartitionForKey(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		p    uint32
		n    uint64
		want int64
	}{
		{0, 1, 1},
		{3, 42, 3<<48 | 42},
		{1, 1<<48 + 5, 1<<48 | 5},
		{0xffff, 1<<48 - 1, -1},
	} {
		got := raftbusv1.SequenceNumber(c.p, c.n)
		if got != c.want {
			t.Errorf("SequenceNumber(%d, %d) = %#x, want %#x", c.p, c.n, got, c.want)
		}
		if p := raftbusv1.PartitionOfSequence(got); p != c.p {
			t.Errorf("PartitionOfSequence(%#x) = %d, want %d", got, p, c.p)
		}
	}
	if raftbusv1.ForwardMetadataKey != "raftbus-forward" || raftbusv1.NeverForward != "never" {
		t.Error("forward metadata changed")
	}
	retryable := map[raftbusv1.ErrorReason]bool{
		raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER:               true,
		raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY:              true,
		raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:          true,
		raftbusv1.ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED: true,
		raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED:           true,
	}
	for v := range raftbusv1.ErrorReason_name {
		r := raftbusv1.ErrorReason(v)
		if r.Retryable() != retryable[r] {
			t.Errorf("%v retryable: %v", r, r.Retryable())
		}
	}
}
