package servicebus

import (
	"context"
	"errors"
	"fmt"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
)

// batchFormat is the message format of a Service Bus batch: one transfer
// whose data sections are each an encoded message.
const batchFormat = 0x80013700

// attachSender serves a link on which the SDK sends to a queue or topic.
func (c *connection) attachSender(l *amqp.Link, e entity) error {
	if e.SubQueue != client.SubQueueNone {
		return &amqp.Error{Condition: amqp.ErrCondNotAllowed, Description: "cannot send to a dead-letter queue"}
	}
	maxBytes, err := c.checkEntity(l.Context(), e, true)
	if err != nil {
		return err
	}
	// The SDKs size their batches by the link's limit: the entity's.
	l.MaxMessageSize = maxBytes
	snd, err := c.h.Client.NewSender(e.Path, nil)
	if err != nil {
		return toAMQPError(err)
	}
	l.OnMessage = func(d *amqp.Delivery) amqp.DeliveryState {
		// The token the link was attached with may have expired since.
		if err := c.authorize(e, rightSend); err != nil {
			return &amqp.Rejected{Error: err}
		}
		msgs, err := decodeSent(d)
		if err != nil {
			return &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrCondDecode, Description: err.Error()}}
		}
		if len(msgs) == 1 {
			err = snd.SendMessage(l.Context(), msgs[0], nil)
		} else if len(msgs) > 1 {
			err = sendBatch(l.Context(), snd, msgs)
		}
		if err != nil {
			c.log.Debug("amqp send failed", "entity", e.Path, "err", err)
			return &amqp.Rejected{Error: toAMQPError(err)}
		}
		return &amqp.Accepted{}
	}
	return nil
}

// sendBatch sends a Service Bus batch as one raftbus batch: all or
// nothing, as the SDKs promise.
func sendBatch(ctx context.Context, snd *client.Sender, msgs []*client.Message) error {
	// The SDK has already held the batch to the entity's size limit; the
	// broker checks it again.
	batch, err := snd.NewMessageBatch(ctx, &client.MessageBatchOptions{MaxBytes: 1 << 30})
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := batch.AddMessage(m, nil); err != nil {
			if errors.Is(err, client.ErrMessageTooLarge) {
				// Size was not limited above: the count is over.
				return &client.Error{Code: client.CodeMessageSizeExceeded,
					Message: fmt.Sprintf("a batch of %d messages is more than the broker takes in one batch; send fewer at once", len(msgs))}
			}
			return err
		}
	}
	return snd.SendMessageBatch(ctx, batch, nil)
}

// decodeSent reads the messages of one delivery: a batch or one message.
func decodeSent(d *amqp.Delivery) ([]*client.Message, error) {
	var outer goamqp.Message
	if err := outer.UnmarshalBinary(d.Payload); err != nil {
		return nil, fmt.Errorf("message: %w", err)
	}
	if d.Format != batchFormat {
		m, err := toClientMessage(&outer)
		if err != nil {
			return nil, err
		}
		return []*client.Message{m}, nil
	}
	msgs := make([]*client.Message, 0, len(outer.Data))
	for i, data := range outer.Data {
		var inner goamqp.Message
		if err := inner.UnmarshalBinary(data); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		m, err := toClientMessage(&inner)
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
