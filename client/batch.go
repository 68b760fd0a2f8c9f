package client

import (
	"context"
	"fmt"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// DefaultMaxBatchBytes is the default size limit of a MessageBatch.
const DefaultMaxBatchBytes = 1 << 20

// maxBatchMessages is the most messages the broker takes in one send.
const maxBatchMessages = 1000

// ErrMessageTooLarge is returned by MessageBatch.AddMessage when the
// message does not fit in the batch's remaining space: send the batch and
// start a new one (or, for an empty batch, the message is too large for
// any batch).
var ErrMessageTooLarge = &Error{Code: CodeMessageSizeExceeded, Message: "the message does not fit in the batch"}

// MessageBatchOptions configure NewMessageBatch.
type MessageBatchOptions struct {
	// MaxBytes limits the batch's encoded size. Default
	// DefaultMaxBatchBytes. Each message must also be within the entity's
	// MaxMessageSizeInKilobytes, which the broker checks.
	MaxBytes uint64
}

// MessageBatch collects messages sent together, all or nothing, into one
// partition: they must share their SessionID and PartitionKey.
type MessageBatch struct {
	maxBytes uint64
	size     uint64
	key      string
	messages []*raftbusv1.Message
}

// NewMessageBatch starts an empty batch for this Sender's entity.
func (s *Sender) NewMessageBatch(ctx context.Context, options *MessageBatchOptions) (*MessageBatch, error) {
	max := uint64(DefaultMaxBatchBytes)
	if options != nil && options.MaxBytes > 0 {
		max = options.MaxBytes
	}
	return &MessageBatch{maxBytes: max}, nil
}

// AddMessageOptions are reserved for future options.
type AddMessageOptions struct{}

// AddMessage adds a message, or returns ErrMessageTooLarge when it would
// take the batch over its size or message count limit. A message whose
// SessionID or PartitionKey differs from the batch's fails with
// CodeInvalidArgument.
func (b *MessageBatch) AddMessage(m *Message, options *AddMessageOptions) error {
	pm, err := toProtoMessage(m)
	if err != nil {
		return err
	}
	key := keyOf(pm)
	if len(b.messages) > 0 && key != b.key {
		return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("a batch goes to one partition: key %q differs from the batch's %q", key, b.key)}
	}
	// Each message costs its size plus the field's tag and length prefix.
	size := uint64(messageSize(pm) + 6)
	if b.size+size > b.maxBytes || len(b.messages) >= maxBatchMessages {
		return ErrMessageTooLarge
	}
	b.key = key
	b.size += size
	b.messages = append(b.messages, pm)
	return nil
}

// NumBytes is the batch's size so far.
func (b *MessageBatch) NumBytes() uint64 { return b.size }

// NumMessages is the number of messages in the batch.
func (b *MessageBatch) NumMessages() int32 { return int32(len(b.messages)) }
