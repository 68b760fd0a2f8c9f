package service

import (
	"context"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// settle ends a message lock with one disposition, at the leader of the
// partition the lock names. forward re-sends the original request there.
func (s *Messaging) settle(ctx context.Context, lock *raftbusv1.MessageLock, cmd *enginev1.Settle,
	forward func(ctx context.Context, c raftbusv1.MessagingServiceClient) error,
) error {
	if lock == nil {
		return apierror.Invalid("lock is required")
	}
	t, err := resolve(ctx, s.node, lock.GetEntityPath())
	if err != nil {
		return err
	}
	e := t.entity
	cmd.EntityPath, cmd.SubQueue, cmd.LockToken = t.path, lock.GetSubQueue(), lock.GetLockToken()
	_, err = route(ctx, s.node, e, lock.GetPartitionId(), routing.Idempotent, func(r Replica) (struct{}, error) {
		_, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_Settle{Settle: cmd}})
		return struct{}{}, err
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (struct{}, error) {
		return struct{}{}, forward(ctx, raftbusv1.NewMessagingServiceClient(conn))
	})
	return err
}

func (s *Messaging) Complete(ctx context.Context, req *raftbusv1.CompleteRequest) (*raftbusv1.CompleteResponse, error) {
	err := s.settle(ctx, req.GetLock(), &enginev1.Settle{Disposition: enginev1.Disposition_DISPOSITION_COMPLETE, SettlementId: req.GetSettlementId()},
		func(ctx context.Context, c raftbusv1.MessagingServiceClient) error {
			_, err := c.Complete(ctx, req)
			return err
		})
	if err != nil {
		return nil, err
	}
	return &raftbusv1.CompleteResponse{}, nil
}

func (s *Messaging) Abandon(ctx context.Context, req *raftbusv1.AbandonRequest) (*raftbusv1.AbandonResponse, error) {
	err := s.settle(ctx, req.GetLock(), &enginev1.Settle{Disposition: enginev1.Disposition_DISPOSITION_ABANDON, PropertiesToModify: req.GetPropertiesToModify(),
		SettlementId: req.GetSettlementId()},
		func(ctx context.Context, c raftbusv1.MessagingServiceClient) error {
			_, err := c.Abandon(ctx, req)
			return err
		})
	if err != nil {
		return nil, err
	}
	return &raftbusv1.AbandonResponse{}, nil
}

// MaxDeadLetterText is the most characters a dead-letter reason or error
// description may have (messaging.proto; Service Bus's limit too).
const MaxDeadLetterText = 4096

func (s *Messaging) DeadLetter(ctx context.Context, req *raftbusv1.DeadLetterRequest) (*raftbusv1.DeadLetterResponse, error) {
	if err := checkDeadLetterText(req.GetReason(), req.GetErrorDescription()); err != nil {
		return nil, err
	}
	err := s.settle(ctx, req.GetLock(), &enginev1.Settle{
		Disposition:                enginev1.Disposition_DISPOSITION_DEAD_LETTER,
		DeadLetterReason:           req.GetReason(),
		DeadLetterErrorDescription: req.GetErrorDescription(),
		PropertiesToModify:         req.GetPropertiesToModify(),
		SettlementId:               req.GetSettlementId(),
	}, func(ctx context.Context, c raftbusv1.MessagingServiceClient) error {
		_, err := c.DeadLetter(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &raftbusv1.DeadLetterResponse{}, nil
}

func (s *Messaging) Defer(ctx context.Context, req *raftbusv1.DeferRequest) (*raftbusv1.DeferResponse, error) {
	err := s.settle(ctx, req.GetLock(), &enginev1.Settle{Disposition: enginev1.Disposition_DISPOSITION_DEFER, PropertiesToModify: req.GetPropertiesToModify(),
		SettlementId: req.GetSettlementId()},
		func(ctx context.Context, c raftbusv1.MessagingServiceClient) error {
			_, err := c.Defer(ctx, req)
			return err
		})
	if err != nil {
		return nil, err
	}
	return &raftbusv1.DeferResponse{}, nil
}

func (s *Messaging) RenewLock(ctx context.Context, req *raftbusv1.RenewLockRequest) (*raftbusv1.RenewLockResponse, error) {
	lock := req.GetLock()
	if lock == nil {
		return nil, apierror.Invalid("lock is required")
	}
	t, err := resolve(ctx, s.node, lock.GetEntityPath())
	if err != nil {
		return nil, err
	}
	e := t.entity
	return route(ctx, s.node, e, lock.GetPartitionId(), routing.Idempotent, func(r Replica) (*raftbusv1.RenewLockResponse, error) {
		res, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{
			EntityPath: t.path, SubQueue: lock.GetSubQueue(), LockToken: lock.GetLockToken(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.RenewLockResponse{LockedUntil: res.GetRenewLock().GetLockedUntil()}, nil
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.RenewLockResponse, error) {
		return raftbusv1.NewMessagingServiceClient(conn).RenewLock(ctx, req)
	})
}

func (s *Messaging) ReceiveDeferred(ctx context.Context, req *raftbusv1.ReceiveDeferredRequest) (*raftbusv1.ReceiveDeferredResponse, error) {
	t, err := resolve(ctx, s.node, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	e := t.entity
	if n := len(req.GetSequenceNumbers()); n == 0 || n > MaxBatch {
		return nil, apierror.Invalid("sequence_numbers must name 1 to %d messages, not %d", MaxBatch, n)
	}
	receiveID, err := receiveIDOf(req.GetReceiveId(), false)
	if err != nil {
		return nil, err
	}
	resp := &raftbusv1.ReceiveDeferredResponse{}
	groups := bySequencePartition(e, req.GetSequenceNumbers())
	sl := req.GetSession()
	if err := sessionHoldsAll(e, sl, groups); err != nil {
		return nil, err
	}
	// Partition by partition while the answer has room: each receives
	// what fits in what is left of MaxReceiveBytes (a partition reached by
	// forwarding, what fits in all of it), the others' messages stay
	// deferred for the caller to ask again.
	received := 0
	for _, id := range sortedKeys(groups) {
		if received >= MaxReceiveBytes {
			break
		}
		seqs, budget := groups[id], int64(MaxReceiveBytes-received)
		msgs, err := route(ctx, s.node, e, id, routing.Idempotent, func(r Replica) ([]*raftbusv1.ReceivedMessage, error) {
			res, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
				EntityPath: t.path, SubQueue: req.GetSubQueue(), ReceiveMode: req.GetReceiveMode(), SequenceNumbers: seqs,
				SessionId: sl.GetSessionId(), SessionLockToken: sl.GetLockToken(), ReceiveId: receiveID, MaxBytes: budget,
			}}})
			return res.GetReceiveDeferred().GetMessages(), err
		}, func(ctx context.Context, conn grpc.ClientConnInterface) ([]*raftbusv1.ReceivedMessage, error) {
			resp, err := raftbusv1.NewMessagingServiceClient(conn).ReceiveDeferred(ctx, &raftbusv1.ReceiveDeferredRequest{
				EntityPath: t.path, SubQueue: req.GetSubQueue(), ReceiveMode: req.GetReceiveMode(), SequenceNumbers: seqs, Session: sl,
				ReceiveId: receiveID,
			})
			return resp.GetMessages(), err
		})
		if err != nil {
			if len(resp.Messages) == 0 || apierror.IsUnknownOutcome(err) {
				// Nothing received yet; or this partition may have received
				// too, and a repeat with the same receive id gets what
				// every partition received.
				return nil, err
			}
			// The earlier partitions' messages are the answer (they are
			// locked or removed by now); this partition's stay deferred
			// for the caller to ask again, as when the answer is full.
			break
		}
		resp.Messages = append(resp.Messages, msgs...)
		received += answerBytes(msgs)
	}
	return resp, nil
}

// answerBytes is what msgs take in an answer.
func answerBytes(msgs []*raftbusv1.ReceivedMessage) int {
	return proto.Size(&raftbusv1.ReceiveResponse{Messages: msgs})
}

// Peek browses in sequence order: across partitions that is partition
// order, since a partitioned entity's numbers start with the partition id.
func (s *Messaging) Peek(ctx context.Context, req *raftbusv1.PeekRequest) (*raftbusv1.PeekResponse, error) {
	t, err := resolve(ctx, s.node, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	e := t.entity
	batch, err := batchSize(req.GetMaxMessages())
	if err != nil {
		return nil, err
	}
	if req.GetSessionId() != "" {
		return s.peekSession(ctx, t, req, batch)
	}
	parts := uint32(len(e.GetPartitions()))
	first, last := uint32(0), parts-1
	if parts > 1 {
		first = min(raftbusv1.PartitionOfSequence(max(req.GetFromSequenceNumber(), 0)), parts)
	}
	if req.PartitionId != nil {
		first, last = req.GetPartitionId(), req.GetPartitionId()
	}
	// Partition by partition while the answer has room (see
	// ReceiveDeferred); a peek changes nothing, so what a forwarded peek
	// returned beyond the room left is dropped, to be peeked again.
	resp := &raftbusv1.PeekResponse{}
	received := 0
	for id := first; id <= last && id < parts && len(resp.Messages) < int(batch) && received < MaxReceiveBytes; id++ {
		from := req.GetFromSequenceNumber()
		if parts > 1 && id > first {
			from = raftbusv1.SequenceNumber(id, 0)
		}
		want, budget := int(batch)-len(resp.Messages), int64(MaxReceiveBytes-received)
		msgs, err := route(ctx, s.node, e, id, routing.Idempotent, func(r Replica) ([]*raftbusv1.ReceivedMessage, error) {
			var out []*raftbusv1.ReceivedMessage
			var perr error
			if err := r.Read(ctx, func(en *engine.Engine) { out, perr = en.Peek(t.path, req.GetSubQueue(), from, want, budget) }); err != nil {
				return nil, err
			}
			return out, perr
		}, func(ctx context.Context, conn grpc.ClientConnInterface) ([]*raftbusv1.ReceivedMessage, error) {
			resp, err := raftbusv1.NewMessagingServiceClient(conn).Peek(ctx, &raftbusv1.PeekRequest{
				EntityPath: t.path, SubQueue: req.GetSubQueue(), FromSequenceNumber: from, MaxMessages: int32(want), PartitionId: &id,
			})
			return resp.GetMessages(), err
		})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			n := answerBytes([]*raftbusv1.ReceivedMessage{m})
			if len(resp.Messages) > 0 && received+n > MaxReceiveBytes {
				return resp, nil
			}
			resp.Messages = append(resp.Messages, m)
			received += n
		}
	}
	return resp, nil
}

func sortedKeys(m map[uint32][]int64) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
