package raftgrpc

import (
	"context"
	"errors"
	"io"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// transportServer is the RaftTransportService of a node: it routes each
// incoming RPC to the transport of the group it names.
type transportServer struct {
	raftv1.UnimplementedRaftTransportServiceServer
	mux *Mux
}

// admit runs the Mux's Admit check on an incoming RPC.
func (s *transportServer) admit(ctx context.Context) error {
	if s.mux.admit == nil {
		return nil
	}
	err := s.mux.admit(ctx)
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

// groupTransport returns the transport of group, waiting for it to open
// when wait is set (see groupOpenWait), or when wake is set and the group
// is dormant here: it opens for the RPC (Config.Wake). RPCs that tell a
// group nothing it needs (AppendEntries without entries) leave it
// dormant.
func (s *transportServer) groupTransport(ctx context.Context, group string, wait, wake bool) (*GroupTransport, error) {
	t := s.mux.group(group)
	if t == nil && ((wake && s.mux.wakeGroup(group)) || wait) {
		t = s.mux.awaitGroup(ctx, group)
	}
	if t == nil {
		return nil, status.Errorf(codes.NotFound, "raft group %q does not run on %s", group, s.mux.localAddr)
	}
	return t, nil
}

func (s *transportServer) AppendEntries(ctx context.Context, req *raftv1.AppendEntriesRequest) (*raftv1.AppendEntriesResponse, error) {
	command := appendEntriesRequestFromProto(req)
	return serveUnary(ctx, s, req.GetGroup(), command, isHeartbeat(command), false, len(command.Entries) > 0, appendEntriesResponseToProto)
}

func (s *transportServer) RequestVote(ctx context.Context, req *raftv1.RequestVoteRequest) (*raftv1.RequestVoteResponse, error) {
	return serveUnary(ctx, s, req.GetGroup(), requestVoteRequestFromProto(req), false, true, true, requestVoteResponseToProto)
}

func (s *transportServer) RequestPreVote(ctx context.Context, req *raftv1.RequestPreVoteRequest) (*raftv1.RequestPreVoteResponse, error) {
	return serveUnary(ctx, s, req.GetGroup(), requestPreVoteRequestFromProto(req), false, true, true, requestPreVoteResponseToProto)
}

func (s *transportServer) TimeoutNow(ctx context.Context, req *raftv1.TimeoutNowRequest) (*raftv1.TimeoutNowResponse, error) {
	if s.mux.refuseLeadership.Load() {
		return nil, status.Errorf(codes.Unavailable, "%s is shutting down: it takes no leadership", s.mux.localAddr)
	}
	return serveUnary(ctx, s, req.GetGroup(), timeoutNowRequestFromProto(req), false, false, true, timeoutNowResponseToProto)
}

// serveUnary hands command to the group's raft and converts its answer, of
// type Resp, with toProto. Vote requests wait for a group about to open
// (waitGroup): they are what a new group's first election sends. wake
// opens a dormant group for the RPC (see groupTransport).
func serveUnary[Resp any, Out any](ctx context.Context, s *transportServer, group string, command any, heartbeat, waitGroup, wake bool, toProto func(Resp) Out) (Out, error) {
	var zero Out
	if err := s.admit(ctx); err != nil {
		return zero, err
	}
	t, err := s.groupTransport(ctx, group, waitGroup, wake)
	if err != nil {
		return zero, err
	}
	resp, err := t.handle(ctx, command, heartbeat)
	if err != nil {
		return zero, toStatus(err)
	}
	out, err := responseAs[Resp](resp)
	if err != nil {
		return zero, status.Error(codes.Internal, err.Error())
	}
	return toProto(out), nil
}

// toStatus turns an error met while serving an RPC into the gRPC status the
// caller receives.
func toStatus(err error) error {
	var handlerErr *handlerError
	switch {
	case errors.As(err, &handlerErr):
		// raft's handler refused the request; the message is all raft gives.
		return status.Error(codes.Unknown, handlerErr.Error())
	case errors.Is(err, ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// pipelineAnswer is one request of an AppendEntriesPipeline stream handed to
// raft, or the error that ended the stream's receiving side.
type pipelineAnswer struct {
	trans  *GroupTransport
	respCh <-chan raft.RPCResponse
	err    error
}

// AppendEntriesPipeline serves a pipeline: a receiving goroutine hands each
// request to raft as it arrives, and this handler sends the answers in
// request order. The receiving goroutine ends when the stream does, which
// gRPC guarantees once this handler has returned.
func (s *transportServer) AppendEntriesPipeline(stream grpc.BidiStreamingServer[raftv1.AppendEntriesPipelineRequest, raftv1.AppendEntriesPipelineResponse]) error {
	if err := s.admit(stream.Context()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	pending := make(chan pipelineAnswer, s.mux.maxInFlight)
	go s.receivePipeline(ctx, stream, pending)

	for {
		var next pipelineAnswer
		select {
		case next = <-pending:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if next.err != nil {
			if errors.Is(next.err, io.EOF) {
				return nil
			}
			return toStatus(next.err)
		}
		msg := &raftv1.AppendEntriesPipelineResponse{}
		resp, err := next.trans.await(ctx, next.respCh)
		var handlerErr *handlerError
		switch {
		case errors.As(err, &handlerErr):
			msg.Error = handlerErr.Error()
		case err != nil:
			return toStatus(err)
		default:
			out, err := responseAs[*raft.AppendEntriesResponse](resp)
			if err != nil {
				msg.Error = err.Error()
			} else {
				msg.Response = appendEntriesResponseToProto(out)
			}
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

// receivePipeline hands the requests of a pipeline stream to raft until the
// stream ends or fails, then queues the reason (io.EOF for a clean end).
func (s *transportServer) receivePipeline(ctx context.Context, stream grpc.BidiStreamingServer[raftv1.AppendEntriesPipelineRequest, raftv1.AppendEntriesPipelineResponse], pending chan<- pipelineAnswer) {
	next := func() pipelineAnswer {
		msg, err := stream.Recv()
		if err != nil {
			return pipelineAnswer{err: err}
		}
		command := appendEntriesRequestFromProto(msg.GetRequest())
		t, err := s.groupTransport(ctx, msg.GetRequest().GetGroup(), false, len(command.Entries) > 0)
		if err != nil {
			return pipelineAnswer{err: err}
		}
		respCh := make(chan raft.RPCResponse, 1)
		if err := t.deliver(ctx, raft.RPC{Command: command, RespChan: respCh}, isHeartbeat(command)); err != nil {
			return pipelineAnswer{err: err}
		}
		return pipelineAnswer{trans: t, respCh: respCh}
	}
	for {
		answer := next()
		select {
		case pending <- answer:
		case <-ctx.Done():
			return
		}
		if answer.err != nil {
			return
		}
	}
}
