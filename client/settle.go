package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Settlement calls are safe to retry after an unknown outcome: each call
// picks a settlement id that its retries repeat, and the broker remembers
// recent settlements with their ids (for the entity's lock duration, at
// least 30 s), so a repeat of one that took effect succeeds and changes
// nothing. A repeat that finds the lock gone and no such memory (the
// first attempt never arrived and the lock expired meanwhile, or it was
// forgotten) leaves the outcome unknown. Another call for a message
// already settled has an id of its own and fails with CodeLockLost, as
// in Service Bus.
//
// Complete, Abandon, DeadLetter and Defer calls made concurrently (from
// any receivers of one Client) for messages whose partitions have the same
// leader travel together in one Settle request, each with its own outcome.

const (
	// maxSettlements bounds one Settle request (the broker's limit).
	maxSettlements = 1000
	// maxSettleBytes bounds the encoded settlements of one request, far
	// below the gRPC message limit (a settlement may carry properties
	// and a dead-letter description).
	maxSettleBytes = 1 << 20
)

// settleKey is where a settlement goes: the node that leads its
// partition, "" when unknown (any node, which forwards).
type settleKey struct {
	addr string
}

// CompleteMessageOptions configure CompleteMessage.
type CompleteMessageOptions struct {
	// SettlementID is for a caller that repeats settlements of its own,
	// such as a gateway relaying another protocol's retries (see
	// settlementIDOf); nil for the others.
	SettlementID []byte
}

// AbandonMessageOptions configure AbandonMessage.
type AbandonMessageOptions struct {
	// PropertiesToModify are merged into the message's application
	// properties.
	PropertiesToModify map[string]any
	// SettlementID: as CompleteMessageOptions.SettlementID.
	SettlementID []byte
}

// DeferMessageOptions configure DeferMessage.
type DeferMessageOptions struct {
	PropertiesToModify map[string]any
	// SettlementID: as CompleteMessageOptions.SettlementID.
	SettlementID []byte
}

// DeadLetterOptions configure DeadLetterMessage.
type DeadLetterOptions struct {
	// Reason and ErrorDescription are recorded on the dead-lettered
	// message (up to 4096 characters each).
	Reason           *string
	ErrorDescription *string
	// PropertiesToModify are merged into its application properties.
	PropertiesToModify map[string]any
	// SettlementID: as CompleteMessageOptions.SettlementID.
	SettlementID []byte
}

// RenewMessageLockOptions are reserved for future options.
type RenewMessageLockOptions struct{}

// CompleteMessage removes a locked message: it was processed. Fails with
// CodeLockLost when the lock expired or the token is wrong.
func (r *Receiver) CompleteMessage(ctx context.Context, message *ReceivedMessage, options *CompleteMessageOptions) error {
	var id []byte
	if options != nil {
		id = options.SettlementID
	}
	return r.settle(ctx, message, &raftbusv1.Settlement{Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE, SettlementId: id})
}

// AbandonMessage releases a message's lock: it is available again at its
// place in the order, its delivery count kept.
func (r *Receiver) AbandonMessage(ctx context.Context, message *ReceivedMessage, options *AbandonMessageOptions) error {
	var props map[string]any
	var id []byte
	if options != nil {
		props, id = options.PropertiesToModify, options.SettlementID
	}
	pp, err := toProtoProperties(props)
	if err != nil {
		return err
	}
	return r.settle(ctx, message, &raftbusv1.Settlement{Disposition: raftbusv1.Disposition_DISPOSITION_ABANDON, PropertiesToModify: pp, SettlementId: id})
}

// DeadLetterMessage moves a locked message to the dead-letter sub-queue.
func (r *Receiver) DeadLetterMessage(ctx context.Context, message *ReceivedMessage, options *DeadLetterOptions) error {
	st := &raftbusv1.Settlement{Disposition: raftbusv1.Disposition_DISPOSITION_DEAD_LETTER}
	if options != nil {
		if options.Reason != nil {
			st.DeadLetterReason = *options.Reason
		}
		if options.ErrorDescription != nil {
			st.DeadLetterErrorDescription = *options.ErrorDescription
		}
		pp, err := toProtoProperties(options.PropertiesToModify)
		if err != nil {
			return err
		}
		st.PropertiesToModify = pp
		st.SettlementId = options.SettlementID
	}
	return r.settle(ctx, message, st)
}

// DeferMessage sets a locked message aside, receivable only by its
// sequence number with ReceiveDeferredMessages.
func (r *Receiver) DeferMessage(ctx context.Context, message *ReceivedMessage, options *DeferMessageOptions) error {
	var props map[string]any
	var id []byte
	if options != nil {
		props, id = options.PropertiesToModify, options.SettlementID
	}
	pp, err := toProtoProperties(props)
	if err != nil {
		return err
	}
	return r.settle(ctx, message, &raftbusv1.Settlement{Disposition: raftbusv1.Disposition_DISPOSITION_DEFER, PropertiesToModify: pp, SettlementId: id})
}

// RenewMessageLock extends a message's lock by the entity's LockDuration
// and updates message.LockedUntil.
func (r *Receiver) RenewMessageLock(ctx context.Context, message *ReceivedMessage, options *RenewMessageLockOptions) error {
	lock, err := r.lockOf(message)
	if err != nil {
		return err
	}
	return r.c.onPartition(ctx, lock.GetEntityPath(), lock.GetPartitionId(), true, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		resp, err := ms.RenewLock(ctx, &raftbusv1.RenewLockRequest{Lock: lock})
		if err == nil {
			message.LockedUntil = resp.GetLockedUntil().AsTime()
		}
		return err
	})
}

// lockOf is the lock of a received message.
func (r *Receiver) lockOf(m *ReceivedMessage) (*raftbusv1.MessageLock, error) {
	if m == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "nil message"}
	}
	if m.LockToken == ([16]byte{}) {
		return nil, &Error{Code: CodeInvalidArgument, Message: "the message has no lock token: it was peeked or received in ReceiveAndDelete mode"}
	}
	path, sub := m.entityPath, m.subQueue
	if path == "" {
		path, sub = r.path, r.sub
	}
	return &raftbusv1.MessageLock{EntityPath: path, SubQueue: sub, PartitionId: m.PartitionID, LockToken: m.LockToken[:]}, nil
}

// settle ends the lock of m as st says, with the settlements of the same
// partition made meanwhile. st keeps its settlement id, or gets one, for
// all the attempts of this call.
func (r *Receiver) settle(ctx context.Context, m *ReceivedMessage, st *raftbusv1.Settlement) error {
	lock, err := r.lockOf(m)
	if err != nil {
		return err
	}
	if st.SettlementId, err = settlementIDOf(st.GetSettlementId()); err != nil {
		return err
	}
	st.Lock = lock
	addr, err := r.c.leaderOf(ctx, lock.GetEntityPath(), lock.GetPartitionId())
	if err != nil {
		return err
	}
	_, err = r.c.settles.do(ctx, settleKey{addr: addr}, st, proto.Size(st), func(ctxErr error) error {
		return &gaveUpError{ctxErr, &Error{
			Code:      CodeOutcomeUnknown,
			Message:   fmt.Sprintf("%v while the settlement was on its way; it may or may not have taken effect", ctxErr),
			Retryable: true,
		}}
	})
	return err
}

// maxSettlementIDSize is the longest settlement id the broker takes.
const maxSettlementIDSize = 64

// settlementIDOf is the settlement id of one settlement call: the
// caller's own, or else a new random one. The broker takes a settlement
// of a message already settled for a repeat (success, no effect) only
// when it has the same id, lock and disposition as the one that took
// effect, so every attempt of one call sends the same id, and a caller
// that repeats calls of its own (a gateway relaying a retried AMQP
// disposition or management request) passes the same 1 to 64 bytes with
// each repeat of one settlement and others for any other settlement of
// the same message (only those need to differ).
func settlementIDOf(id []byte) ([]byte, error) {
	if len(id) > maxSettlementIDSize {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("a settlement id has at most %d bytes, not %d", maxSettlementIDSize, len(id))}
	}
	if len(id) > 0 {
		return id, nil
	}
	return newReceiveID(), nil
}

// settleCoalesced sends the settlements of concurrent calls bound for one
// leader in one Settle request, once. When the request as a whole fails,
// or a settlement fails for a reason a retry can get past (its partition's
// leader moved), each settlement goes on alone under the retry policy of
// Client.retry: after an unknown outcome, a lock found gone reports the
// outcome unknown, not lost.
func (c *Client) settleCoalesced(ctx context.Context, key settleKey, calls []*call[*raftbusv1.Settlement, struct{}]) {
	req := &raftbusv1.SettleRequest{Settlements: make([]*raftbusv1.Settlement, len(calls))}
	for i, cl := range calls {
		req.Settlements[i] = cl.item
	}
	var resp *raftbusv1.SettleResponse
	addr, err := c.onNode(ctx, key.addr, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		var err error
		resp, err = ms.Settle(ctx, req)
		if err == nil && len(resp.GetResults()) != len(calls) {
			err = status.Errorf(codes.Internal, "the broker answered %d results for %d settlements", len(resp.GetResults()), len(calls))
		}
		return err
	})
	var wg sync.WaitGroup
	for i, cl := range calls {
		failure := err
		if err == nil {
			info := resp.GetResults()[i].GetError()
			if info == nil {
				continue
			}
			e := errorOfInfo(info, codes.Unknown)
			e.node = addr
			failure = e
		}
		var e *Error
		if !errors.As(failure, &e) || (err == nil && !e.Retryable) {
			cl.err = failure
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.err = c.settleAlone(cl.ctx, cl.item, e)
		}()
	}
	wg.Wait()
}

// settleAlone retries one settlement whose first attempt failed with
// first.
func (c *Client) settleAlone(ctx context.Context, st *raftbusv1.Settlement, first *Error) error {
	return c.onPartitionAfter(ctx, first, st.GetLock().GetEntityPath(), st.GetLock().GetPartitionId(), true, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		resp, err := ms.Settle(ctx, &raftbusv1.SettleRequest{Settlements: []*raftbusv1.Settlement{st}})
		if err != nil {
			return err
		}
		if len(resp.GetResults()) != 1 {
			return status.Errorf(codes.Internal, "the broker answered %d results for 1 settlement", len(resp.GetResults()))
		}
		if info := resp.GetResults()[0].GetError(); info != nil {
			return errorOfInfo(info, codes.Unknown)
		}
		return nil
	})
}
