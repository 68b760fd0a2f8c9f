package service

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/engine"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A session lives in one partition: the one its id hashes to, where its
// messages were sent (see sendTarget). Every call under a session goes to
// that partition's leader.

// sessionEntity finds a queue or subscription that requires sessions.
func (s *Messaging) sessionEntity(ctx context.Context, path string) (resolved, error) {
	t, err := resolve(ctx, s.node, path)
	if err != nil {
		return resolved{}, err
	}
	if !t.requiresSession() {
		return resolved{}, apierror.Invalid("%q does not require sessions", t.path)
	}
	return t, nil
}

// sessionPartition is the partition of a session of e.
func sessionPartition(e *clusterv1.Entity, sessionID string) uint32 {
	return raftbusv1.PartitionForKey(sessionID, uint32(len(e.GetPartitions())))
}

// heldSession checks a SessionLock and returns its partition.
func heldSession(e *clusterv1.Entity, sl *raftbusv1.SessionLock) (uint32, error) {
	if sl.GetSessionId() == "" {
		return 0, apierror.Invalid("session.session_id is required")
	}
	if len(sl.GetLockToken()) != 16 {
		return 0, apierror.Invalid("session.lock_token must be 16 bytes, not %d", len(sl.GetLockToken()))
	}
	return sessionPartition(e, sl.GetSessionId()), nil
}

// sessionLockOf is the SessionLock a Lock command receives under, or nil.
func sessionLockOf(lock *enginev1.Lock) *raftbusv1.SessionLock {
	if lock.GetSessionId() == "" {
		return nil
	}
	return &raftbusv1.SessionLock{SessionId: lock.GetSessionId(), LockToken: lock.GetSessionLockToken()}
}

// engineError gives an engine error read outside a command its reason.
func engineError(err error) error {
	var ee *engine.Error
	if errors.As(err, &ee) {
		return apierror.Errorf(ee.Reason, "%s", ee.Message)
	}
	return err
}

func (s *Messaging) AcceptSession(ctx context.Context, req *raftbusv1.AcceptSessionRequest) (*raftbusv1.AcceptSessionResponse, error) {
	t, err := s.sessionEntity(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	e := t.entity
	wait, err := waitTime(req.GetMaxWait())
	if err != nil {
		return nil, err
	}
	if sid := req.GetSessionId(); sid != "" {
		id := sessionPartition(e, sid)
		if req.PartitionId != nil && req.GetPartitionId() != id {
			return nil, apierror.Invalid("session %q lives in partition %d, not %d", sid, id, req.GetPartitionId())
		}
		return s.acceptFrom(ctx, t, id, sid, 0)
	}
	if req.PartitionId != nil {
		return s.acceptFrom(ctx, t, req.GetPartitionId(), "", wait)
	}
	resp, err := firstAcross(s.pollOrder(e), wait, func(id uint32, wait time.Duration) (*raftbusv1.AcceptSessionResponse, bool, error) {
		resp, err := s.acceptFrom(ctx, t, id, "", wait)
		return resp, resp.GetSessionId() != "", err
	})
	if resp == nil && err == nil {
		resp = &raftbusv1.AcceptSessionResponse{}
	}
	return resp, err
}

// acceptFrom accepts a session of partition id: the named one, or the
// next available waiting up to wait.
func (s *Messaging) acceptFrom(ctx context.Context, t resolved, id uint32, sessionID string, wait time.Duration) (*raftbusv1.AcceptSessionResponse, error) {
	return route(ctx, s.node, t.entity, id, routing.Once, func(r Replica) (*raftbusv1.AcceptSessionResponse, error) {
		res, err := r.AcceptSession(ctx, &enginev1.AcceptSession{EntityPath: t.path, SessionId: sessionID}, wait)
		if err != nil {
			return nil, err
		}
		resp := &raftbusv1.AcceptSessionResponse{SessionId: res.GetSessionId()}
		if resp.SessionId != "" {
			resp.LockToken, resp.LockedUntil, resp.PartitionId = res.GetLockToken(), res.GetLockedUntil(), id
		}
		return resp, nil
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.AcceptSessionResponse, error) {
		return raftbusv1.NewMessagingServiceClient(conn).AcceptSession(ctx, &raftbusv1.AcceptSessionRequest{
			EntityPath: t.path, SessionId: sessionID, MaxWait: durationpb.New(wait), PartitionId: &id,
		})
	})
}

// receiveSession receives from a held session, at its partition.
func (s *Messaging) receiveSession(ctx context.Context, req *raftbusv1.ReceiveRequest, receiveID []byte) (*raftbusv1.ReceiveResponse, error) {
	t, err := s.sessionEntity(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	e := t.entity
	if req.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED {
		return nil, apierror.Invalid("the dead-letter sub-queue is received without a session")
	}
	id, err := heldSession(e, req.GetSession())
	if err != nil {
		return nil, err
	}
	if req.PartitionId != nil && req.GetPartitionId() != id {
		return nil, apierror.Invalid("session %q lives in partition %d, not %d", req.GetSession().GetSessionId(), id, req.GetPartitionId())
	}
	batch, err := batchSize(req.GetMaxMessages())
	if err != nil {
		return nil, err
	}
	wait, err := waitTime(req.GetMaxWait())
	if err != nil {
		return nil, err
	}
	lock := &enginev1.Lock{
		EntityPath: t.path, ReceiveMode: req.GetReceiveMode(), MaxMessages: batch, MaxBytes: MaxReceiveBytes,
		SessionId: req.GetSession().GetSessionId(), SessionLockToken: req.GetSession().GetLockToken(),
		ReceiveId: receiveID, Replay: req.GetReplay(),
	}
	if req.GetReplay() {
		return s.replay(ctx, e, lock, &id)
	}
	msgs, err := s.receiveFrom(ctx, e, id, lock, wait)
	if err != nil {
		return nil, err
	}
	return &raftbusv1.ReceiveResponse{Messages: msgs}, nil
}

// sessionHoldsAll checks that the deferred messages asked for under a
// session are all in the session's partition.
func sessionHoldsAll(e *clusterv1.Entity, sl *raftbusv1.SessionLock, groups map[uint32][]int64) error {
	if sl == nil {
		return nil
	}
	id, err := heldSession(e, sl)
	if err != nil {
		return err
	}
	for p, seqs := range groups {
		if p != id {
			return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND,
				"sequence number %d is not in the partition of session %q", seqs[0], sl.GetSessionId())
		}
	}
	return nil
}

// peekSession peeks the messages of one session, in its partition.
func (s *Messaging) peekSession(ctx context.Context, t resolved, req *raftbusv1.PeekRequest, batch int32) (*raftbusv1.PeekResponse, error) {
	e := t.entity
	if req.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED {
		return nil, apierror.Invalid("peeking by session covers the main queue only")
	}
	sid := req.GetSessionId()
	id := sessionPartition(e, sid)
	if req.PartitionId != nil && req.GetPartitionId() != id {
		return &raftbusv1.PeekResponse{}, nil
	}
	from := req.GetFromSequenceNumber()
	return route(ctx, s.node, e, id, routing.Idempotent, func(r Replica) (*raftbusv1.PeekResponse, error) {
		var out []*raftbusv1.ReceivedMessage
		var perr error
		if err := r.Read(ctx, func(en *engine.Engine) { out, perr = en.PeekSession(t.path, sid, from, int(batch), MaxReceiveBytes) }); err != nil {
			return nil, err
		}
		return &raftbusv1.PeekResponse{Messages: out}, engineError(perr)
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.PeekResponse, error) {
		return raftbusv1.NewMessagingServiceClient(conn).Peek(ctx, &raftbusv1.PeekRequest{
			EntityPath: t.path, FromSequenceNumber: from, MaxMessages: batch, PartitionId: &id, SessionId: sid,
		})
	})
}

// atSession serves a request about a held session at its partition's
// leader; forward re-sends the request there, again after an unknown
// outcome as rep allows.
func atSession[Resp any](ctx context.Context, s *Messaging, path string, sl *raftbusv1.SessionLock, rep routing.Repeat,
	local func(r Replica, path string) (Resp, error),
	forward func(ctx context.Context, c raftbusv1.MessagingServiceClient) (Resp, error),
) (Resp, error) {
	var zero Resp
	t, err := s.sessionEntity(ctx, path)
	if err != nil {
		return zero, err
	}
	id, err := heldSession(t.entity, sl)
	if err != nil {
		return zero, err
	}
	return route(ctx, s.node, t.entity, id, rep, func(r Replica) (Resp, error) {
		return local(r, t.path)
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (Resp, error) {
		return forward(ctx, raftbusv1.NewMessagingServiceClient(conn))
	})
}

func (s *Messaging) RenewSessionLock(ctx context.Context, req *raftbusv1.RenewSessionLockRequest) (*raftbusv1.RenewSessionLockResponse, error) {
	sl := req.GetSession()
	return atSession(ctx, s, req.GetEntityPath(), sl, routing.Idempotent, func(r Replica, path string) (*raftbusv1.RenewSessionLockResponse, error) {
		res, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_RenewSessionLock{RenewSessionLock: &enginev1.RenewSessionLock{
			EntityPath: path, SessionId: sl.GetSessionId(), LockToken: sl.GetLockToken(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.RenewSessionLockResponse{LockedUntil: res.GetRenewSessionLock().GetLockedUntil()}, nil
	}, func(ctx context.Context, c raftbusv1.MessagingServiceClient) (*raftbusv1.RenewSessionLockResponse, error) {
		return c.RenewSessionLock(ctx, req)
	})
}

// GetSessionState reads at the leader after a read-index check, so the
// holder sees its own last SetSessionState.
func (s *Messaging) GetSessionState(ctx context.Context, req *raftbusv1.GetSessionStateRequest) (*raftbusv1.GetSessionStateResponse, error) {
	sl := req.GetSession()
	return atSession(ctx, s, req.GetEntityPath(), sl, routing.Idempotent, func(r Replica, path string) (*raftbusv1.GetSessionStateResponse, error) {
		var state []byte
		var serr error
		now, err := r.Now()
		if err != nil {
			return nil, err
		}
		if err := r.Read(ctx, func(en *engine.Engine) {
			state, serr = en.GetSessionState(path, sl.GetSessionId(), sl.GetLockToken(), now)
		}); err != nil {
			return nil, err
		}
		if serr != nil {
			return nil, engineError(serr)
		}
		return &raftbusv1.GetSessionStateResponse{State: state}, nil
	}, func(ctx context.Context, c raftbusv1.MessagingServiceClient) (*raftbusv1.GetSessionStateResponse, error) {
		return c.GetSessionState(ctx, req)
	})
}

func (s *Messaging) SetSessionState(ctx context.Context, req *raftbusv1.SetSessionStateRequest) (*raftbusv1.SetSessionStateResponse, error) {
	sl := req.GetSession()
	return atSession(ctx, s, req.GetEntityPath(), sl, routing.Idempotent, func(r Replica, path string) (*raftbusv1.SetSessionStateResponse, error) {
		_, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_SetSessionState{SetSessionState: &enginev1.SetSessionState{
			EntityPath: path, SessionId: sl.GetSessionId(), LockToken: sl.GetLockToken(), State: req.GetState(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.SetSessionStateResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.MessagingServiceClient) (*raftbusv1.SetSessionStateResponse, error) {
		return c.SetSessionState(ctx, req)
	})
}

func (s *Messaging) CloseSession(ctx context.Context, req *raftbusv1.CloseSessionRequest) (*raftbusv1.CloseSessionResponse, error) {
	sl := req.GetSession()
	return atSession(ctx, s, req.GetEntityPath(), sl, routing.Idempotent, func(r Replica, path string) (*raftbusv1.CloseSessionResponse, error) {
		_, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_ReleaseSession{ReleaseSession: &enginev1.ReleaseSession{
			EntityPath: path, SessionId: sl.GetSessionId(), LockToken: sl.GetLockToken(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.CloseSessionResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.MessagingServiceClient) (*raftbusv1.CloseSessionResponse, error) {
		return c.CloseSession(ctx, req)
	})
}
