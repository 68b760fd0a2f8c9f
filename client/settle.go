package client

import (
	"context"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Settlement calls are safe to retry after an unknown outcome: a repeat of
// one that took effect fails with CodeLockLost and changes nothing.

// CompleteMessageOptions are reserved for future options.
type CompleteMessageOptions struct{}

// AbandonMessageOptions configure AbandonMessage.
type AbandonMessageOptions struct {
	// PropertiesToModify are merged into the message's application
	// properties.
	PropertiesToModify map[string]any
}

// DeferMessageOptions configure DeferMessage.
type DeferMessageOptions struct {
	PropertiesToModify map[string]any
}

// DeadLetterOptions configure DeadLetterMessage.
type DeadLetterOptions struct {
	// Reason and ErrorDescription are recorded on the dead-lettered
	// message (up to 4096 characters each).
	Reason           *string
	ErrorDescription *string
	// PropertiesToModify are merged into its application properties.
	PropertiesToModify map[string]any
}

// RenewMessageLockOptions are reserved for future options.
type RenewMessageLockOptions struct{}

// CompleteMessage removes a locked message: it was processed. Fails with
// CodeLockLost when the lock expired or the token is wrong.
func (r *Receiver) CompleteMessage(ctx context.Context, message *ReceivedMessage, options *CompleteMessageOptions) error {
	return r.settle(ctx, message, func(ctx context.Context, ms raftbusv1.MessagingServiceClient, lock *raftbusv1.MessageLock) error {
		_, err := ms.Complete(ctx, &raftbusv1.CompleteRequest{Lock: lock})
		return err
	})
}

// AbandonMessage releases a message's lock: it is available again at its
// place in the order, its delivery count kept.
func (r *Receiver) AbandonMessage(ctx context.Context, message *ReceivedMessage, options *AbandonMessageOptions) error {
	var props map[string]any
	if options != nil {
		props = options.PropertiesToModify
	}
	pp, err := toProtoProperties(props)
	if err != nil {
		return err
	}
	return r.settle(ctx, message, func(ctx context.Context, ms raftbusv1.MessagingServiceClient, lock *raftbusv1.MessageLock) error {
		_, err := ms.Abandon(ctx, &raftbusv1.AbandonRequest{Lock: lock, PropertiesToModify: pp})
		return err
	})
}

// DeadLetterMessage moves a locked message to the dead-letter sub-queue.
func (r *Receiver) DeadLetterMessage(ctx context.Context, message *ReceivedMessage, options *DeadLetterOptions) error {
	req := &raftbusv1.DeadLetterRequest{}
	if options != nil {
		if options.Reason != nil {
			req.Reason = *options.Reason
		}
		if options.ErrorDescription != nil {
			req.ErrorDescription = *options.ErrorDescription
		}
		pp, err := toProtoProperties(options.PropertiesToModify)
		if err != nil {
			return err
		}
		req.PropertiesToModify = pp
	}
	return r.settle(ctx, message, func(ctx context.Context, ms raftbusv1.MessagingServiceClient, lock *raftbusv1.MessageLock) error {
		req.Lock = lock
		_, err := ms.DeadLetter(ctx, req)
		return err
	})
}

// DeferMessage sets a locked message aside, receivable only by its
// sequence number with ReceiveDeferredMessages.
func (r *Receiver) DeferMessage(ctx context.Context, message *ReceivedMessage, options *DeferMessageOptions) error {
	var props map[string]any
	if options != nil {
		props = options.PropertiesToModify
	}
	pp, err := toProtoProperties(props)
	if err != nil {
		return err
	}
	return r.settle(ctx, message, func(ctx context.Context, ms raftbusv1.MessagingServiceClient, lock *raftbusv1.MessageLock) error {
		_, err := ms.Defer(ctx, &raftbusv1.DeferRequest{Lock: lock, PropertiesToModify: pp})
		return err
	})
}

// RenewMessageLock extends a message's lock by the entity's LockDuration
// and updates message.LockedUntil.
func (r *Receiver) RenewMessageLock(ctx context.Context, message *ReceivedMessage, options *RenewMessageLockOptions) error {
	return r.settle(ctx, message, func(ctx context.Context, ms raftbusv1.MessagingServiceClient, lock *raftbusv1.MessageLock) error {
		resp, err := ms.RenewLock(ctx, &raftbusv1.RenewLockRequest{Lock: lock})
		if err == nil {
			message.LockedUntil = resp.GetLockedUntil().AsTime()
		}
		return err
	})
}

func (r *Receiver) settle(ctx context.Context, m *ReceivedMessage,
	call func(ctx context.Context, ms raftbusv1.MessagingServiceClient, lock *raftbusv1.MessageLock) error) error {
	if m == nil {
		return &Error{Code: CodeInvalidArgument, Message: "nil message"}
	}
	if m.LockToken == ([16]byte{}) {
		return &Error{Code: CodeInvalidArgument, Message: "the message has no lock token: it was peeked or received in ReceiveAndDelete mode"}
	}
	path, sub := m.entityPath, m.subQueue
	if path == "" {
		path, sub = r.path, r.sub
	}
	lock := &raftbusv1.MessageLock{EntityPath: path, SubQueue: sub, PartitionId: m.PartitionID, LockToken: m.LockToken[:]}
	return r.c.onPartition(ctx, path, m.PartitionID, true, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		return call(ctx, ms, lock)
	})
}
