package service

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A ReceiveStream is a series of Receives that share their entity,
// sub-queue, mode, partition and session (the stream's open request):
// each grant of credit is served as the unary Receive with the grant's
// receive id would be, through the same interceptors (see
// ServeGrantsThrough), so a grant is locked, removed, forwarded, bounded,
// authorized and fails exactly as that Receive. A stream that breaks thus
// leaves nothing a Receive would not have left: the client replays each
// grant it got no response for, by its receive id.

// ServeGrantsThrough makes every grant of a ReceiveStream pass through
// intercept (the node's unary interceptors, chained) as a unary Receive
// does: the access guard, the call bounds, metrics and status mapping see
// each grant as the Receive it is. Without it grants go straight to
// Receive (tests of this package).
func (s *Messaging) ServeGrantsThrough(intercept grpc.UnaryServerInterceptor) {
	info := &grpc.UnaryServerInfo{Server: s, FullMethod: raftbusv1.MessagingService_Receive_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return s.Receive(ctx, req.(*raftbusv1.ReceiveRequest))
	}
	s.grant = func(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error) {
		resp, err := intercept(ctx, req, info, handler)
		if err != nil {
			return nil, err
		}
		return resp.(*raftbusv1.ReceiveResponse), nil
	}
}

// serveGrant serves one grant as a unary Receive.
func (s *Messaging) serveGrant(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error) {
	if s.grant != nil {
		return s.grant(ctx, req)
	}
	return s.Receive(ctx, req)
}

// ReceiveStream serves MessagingService.ReceiveStream: it checks the open
// request, then serves the grants one after the other, in order, sending
// each one's response before reading the next grant (a client that
// granted ahead has it waiting already).
func (s *Messaging) ReceiveStream(stream raftbusv1.MessagingService_ReceiveStreamServer) error {
	return apierror.Status(s.receiveStream(stream))
}

func (s *Messaging) receiveStream(stream raftbusv1.MessagingService_ReceiveStreamServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return endOfStream(err)
	}
	open := first.GetOpen()
	if open == nil {
		return apierror.Invalid("the first request of a ReceiveStream must be open")
	}
	if err := s.checkOpen(ctx, open); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return endOfStream(err)
		}
		credit := req.GetCredit()
		if credit == nil {
			return apierror.Invalid("a ReceiveStream is opened once: every request after the first must be credit")
		}
		if len(credit.GetReceiveId()) == 0 {
			return apierror.Invalid("credit needs a receive_id, the client's to replay the grant with")
		}
		if err := stream.Send(s.answerGrant(ctx, open, credit)); err != nil {
			return err
		}
	}
}

// endOfStream is nil when the client closed its side of the stream, the
// error of the stream otherwise.
func endOfStream(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// answerGrant serves credit as a Receive with the fields of open and
// returns its response: the messages, or the error Receive would have
// returned.
func (s *Messaging) answerGrant(ctx context.Context, open *raftbusv1.ReceiveStreamOpen, credit *raftbusv1.ReceiveCredit) *raftbusv1.ReceiveStreamResponse {
	resp, err := s.serveGrant(ctx, grantRequest(open, credit))
	if err != nil {
		return &raftbusv1.ReceiveStreamResponse{ReceiveId: credit.GetReceiveId(), Error: apierror.Info(err)}
	}
	return &raftbusv1.ReceiveStreamResponse{ReceiveId: credit.GetReceiveId(), Messages: resp.GetMessages()}
}

// grantRequest is the unary Receive a grant stands for.
func grantRequest(open *raftbusv1.ReceiveStreamOpen, credit *raftbusv1.ReceiveCredit) *raftbusv1.ReceiveRequest {
	return &raftbusv1.ReceiveRequest{
		EntityPath:  open.GetEntityPath(),
		SubQueue:    open.GetSubQueue(),
		ReceiveMode: open.GetReceiveMode(),
		PartitionId: open.PartitionId,
		Session:     open.GetSession(),
		ReceiveId:   credit.GetReceiveId(),
		MaxMessages: credit.GetMaxMessages(),
		MaxWait:     credit.GetMaxWait(),
	}
}

// checkOpen refuses a stream whose receives would all fail as Receive
// checks them before receiving: an unknown entity (NOT_FOUND), a session
// entity without a session, a session not held or in another partition.
// A grant is checked again as it is served (the entity may go meanwhile).
func (s *Messaging) checkOpen(ctx context.Context, open *raftbusv1.ReceiveStreamOpen) error {
	if open.GetSession() == nil {
		t, err := resolve(ctx, s.node, open.GetEntityPath())
		if err != nil {
			return err
		}
		if t.requiresSession() && open.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER {
			return apierror.Invalid("%q requires sessions: accept a session and receive from it", t.path)
		}
		return nil
	}
	t, err := s.sessionEntity(ctx, open.GetEntityPath())
	if err != nil {
		return err
	}
	if open.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED {
		return apierror.Invalid("the dead-letter sub-queue is received without a session")
	}
	id, err := heldSession(t.entity, open.GetSession())
	if err != nil {
		return err
	}
	if open.PartitionId != nil && open.GetPartitionId() != id {
		return apierror.Invalid("session %q lives in partition %d, not %d", open.GetSession().GetSessionId(), id, open.GetPartitionId())
	}
	return nil
}
