package partition_test

import (
	"context"
	"errors"
	"testing"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestCommandTooLargeToReplicateIsRefusedBeforeRaft checks the door of a
// partition: a request larger than MaxCommandBytes is refused with
// MESSAGE_SIZE_EXCEEDED, not retryable, and nothing is proposed; one just
// under it is replicated.
func TestCommandTooLargeToReplicateIsRefusedBeforeRaft(t *testing.T) {
	p := openAlone(t, nil)
	// The entity's own limit is not the one at stake.
	configure(t, p, &raftbusv1.QueueProperties{MaxMessageSizeInKilobytes: ptr[int64](1024)})
	before := p.Raft().LastIndex()
	_, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{Body: make([]byte, partition.MaxCommandBytes)}))
	var pe *partition.Error
	if partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED || !errors.As(err, &pe) || pe.Retryable {
		t.Fatalf("a command over MaxCommandBytes: %v, want MESSAGE_SIZE_EXCEEDED, not retryable", err)
	}
	if after := p.Raft().LastIndex(); after != before {
		t.Fatalf("the log grew from %d to %d entries: the refused command was proposed", before, after)
	}
	// Half a dozen messages of 150 KB, sent as one batch, are within it.
	var batch []*raftbusv1.Message
	for range 6 {
		batch = append(batch, &raftbusv1.Message{Body: make([]byte, 150_000)})
	}
	if _, err := p.Apply(context.Background(), sendCmd(batch...)); err != nil {
		t.Fatalf("a batch of 900 KB: %v", err)
	}
}
