package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// SessionReceiver receives the messages of one session it holds locked,
// in order. It has every method of Receiver (settlement, peek, deferred
// messages) restricted to its session, plus the session's state and lock.
//
// ReceiveMessages hands out up to maxMessages of the session's next
// messages, in order. They are locked under the session lock, as in
// Service Bus: their LockedUntil is the session's at receipt, they stay
// locked for as long as the session lock is held (RenewSessionLock keeps
// them; RenewMessageLock on one renews the session lock), and settling
// them fails with CodeSessionLockLost once it is lost.
type SessionReceiver struct {
	*Receiver
	mu          sync.Mutex
	lockedUntil time.Time
}

// SessionReceiverOptions configure a SessionReceiver.
type SessionReceiverOptions struct {
	ReceiveMode ReceiveMode
}

// AcceptSessionForQueue locks the named session of a queue (even one with
// no messages yet). Fails with CodeSessionCannotBeLocked when another
// receiver holds it (after the client's retries).
func (c *Client) AcceptSessionForQueue(ctx context.Context, queue, sessionID string, options *SessionReceiverOptions) (*SessionReceiver, error) {
	return c.acceptSession(ctx, queue, sessionID, options)
}

// AcceptSessionForSubscription locks the named session of a subscription.
func (c *Client) AcceptSessionForSubscription(ctx context.Context, topic, subscription, sessionID string, options *SessionReceiverOptions) (*SessionReceiver, error) {
	return c.acceptSession(ctx, subscriptionPath(topic, subscription), sessionID, options)
}

// AcceptNextSessionForQueue locks the next available session that no one
// holds, waiting for one until ctx ends: within a partition the one with
// the oldest available message; the partitions of a partitioned queue are
// asked in turn, not by the age of their sessions (as in Service Bus).
// When none becomes available it returns ctx's error.
func (c *Client) AcceptNextSessionForQueue(ctx context.Context, queue string, options *SessionReceiverOptions) (*SessionReceiver, error) {
	return c.acceptSession(ctx, queue, "", options)
}

// AcceptNextSessionForSubscription is AcceptNextSessionForQueue for a
// subscription.
func (c *Client) AcceptNextSessionForSubscription(ctx context.Context, topic, subscription string, options *SessionReceiverOptions) (*SessionReceiver, error) {
	return c.acceptSession(ctx, subscriptionPath(topic, subscription), "", options)
}

func (c *Client) acceptSession(ctx context.Context, path, sessionID string, options *SessionReceiverOptions) (*SessionReceiver, error) {
	ro := &ReceiverOptions{}
	if options != nil {
		ro.ReceiveMode = options.ReceiveMode
	}
	r, err := c.newReceiver(path, ro)
	if err != nil {
		return nil, err
	}
	parts, err := c.routes.partitions(ctx, routeKey(path))
	if err != nil {
		return nil, err
	}
	for {
		wait := longPoll
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(d)-100*time.Millisecond)
		}
		req := &raftbusv1.AcceptSessionRequest{EntityPath: path, SessionId: sessionID, MaxWait: durationpb.New(max(wait, 0))}
		var resp *raftbusv1.AcceptSessionResponse
		call := func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
			var err error
			resp, err = ms.AcceptSession(ctx, req)
			return err
		}
		// A lost answer leaves the session locked, unheld, until its lock
		// expires (its messages wait; their delivery counts do not
		// change). Accepting the next available session again is then
		// harmless: it gets another session. Accepting a named session
		// again would find it locked and say CodeSessionCannotBeLocked,
		// which is not the truth, so that outcome goes to the caller as
		// CodeOutcomeUnknown.
		if sessionID != "" && parts > 0 {
			err = c.onPartition(ctx, path, raftbusv1.PartitionForKey(sessionID, parts), false, call)
		} else {
			err = c.onAnyNode(ctx, true, call)
		}
		if err != nil {
			return nil, err
		}
		if resp.GetSessionId() != "" {
			r.session = &raftbusv1.SessionLock{SessionId: resp.GetSessionId(), LockToken: resp.GetLockToken()}
			r.sessionPartition = resp.GetPartitionId()
			return &SessionReceiver{Receiver: r, lockedUntil: timeOf(resp.GetLockedUntil())}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) <= 100*time.Millisecond {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
}

// SessionID is the id of the held session.
func (s *SessionReceiver) SessionID() string { return s.session.GetSessionId() }

// LockedUntil is when the session lock ends unless renewed.
func (s *SessionReceiver) LockedUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockedUntil
}

// GetSessionStateOptions are reserved for future options.
type GetSessionStateOptions struct{}

// SetSessionStateOptions are reserved for future options.
type SetSessionStateOptions struct{}

// RenewSessionLockOptions are reserved for future options.
type RenewSessionLockOptions struct{}

// GetSessionState returns the session's state (nil when unset).
func (s *SessionReceiver) GetSessionState(ctx context.Context, options *GetSessionStateOptions) ([]byte, error) {
	var resp *raftbusv1.GetSessionStateResponse
	err := s.onSession(ctx, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		var err error
		resp, err = ms.GetSessionState(ctx, &raftbusv1.GetSessionStateRequest{EntityPath: s.path, Session: s.session})
		return err
	})
	return resp.GetState(), err
}

// SetSessionState replaces the session's state; nil clears it.
func (s *SessionReceiver) SetSessionState(ctx context.Context, state []byte, options *SetSessionStateOptions) error {
	return s.onSession(ctx, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		_, err := ms.SetSessionState(ctx, &raftbusv1.SetSessionStateRequest{EntityPath: s.path, Session: s.session, State: state})
		return err
	})
}

// RenewSessionLock extends the session lock by the entity's LockDuration.
func (s *SessionReceiver) RenewSessionLock(ctx context.Context, options *RenewSessionLockOptions) error {
	return s.onSession(ctx, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		resp, err := ms.RenewSessionLock(ctx, &raftbusv1.RenewSessionLockRequest{EntityPath: s.path, Session: s.session})
		if err == nil {
			s.mu.Lock()
			s.lockedUntil = timeOf(resp.GetLockedUntil())
			s.mu.Unlock()
		}
		return err
	})
}

// Close releases the session lock: messages locked under it become
// available again.
func (s *SessionReceiver) Close(ctx context.Context) error {
	return s.onSession(ctx, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		_, err := ms.CloseSession(ctx, &raftbusv1.CloseSessionRequest{EntityPath: s.path, Session: s.session})
		return err
	})
}

// Session calls change nothing when repeated (state writes replace, lock
// renewals extend), so they are retried after an unknown outcome.
func (s *SessionReceiver) onSession(ctx context.Context, call func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error) error {
	return s.c.onPartition(ctx, s.path, s.sessionPartition, true, call)
}
