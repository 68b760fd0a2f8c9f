package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestAnUnknownOutcomeAtTheCallersDeadlineIsDeadlineExceeded(t *testing.T) {
	unknown := &partition.Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, Message: "deadline while replicating", Retryable: true}
	notFound := &partition.Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, Message: "no such queue"}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		code codes.Code
	}{
		{"unknown at the deadline", expired, unknown, codes.DeadlineExceeded},
		{"unknown before it", context.Background(), unknown, codes.Unavailable},
		{"not found at the deadline", expired, notFound, codes.NotFound},
	} {
		st := status.Convert(deadlineCode(c.ctx, apierror.Status(c.err)))
		if st.Code() != c.code {
			t.Errorf("%s: code %v, want %v", c.name, st.Code(), c.code)
		}
		if !apierror.HasInfo(st) || apierror.From(st.Err()).Reason != c.err.(*partition.Error).Reason {
			t.Errorf("%s: lost its ErrorInfo: %v", c.name, st.Details())
		}
	}
}

func TestDeadLetterTextLongerThanDocumentedIsRefused(t *testing.T) {
	s := &Messaging{}
	long := strings.Repeat("é", MaxDeadLetterText+1)
	for _, req := range []*raftbusv1.DeadLetterRequest{{Reason: long}, {ErrorDescription: long}} {
		_, err := s.DeadLetter(context.Background(), req)
		if apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("dead-letter with %d characters: %v, want INVALID_ARGUMENT", MaxDeadLetterText+1, err)
		}
	}
}

// What the layers below fail with reaches the client as the status of
// its reason, with an ErrorInfo saying whether to retry and where the
// leader is; a panic is INTERNAL with a tracking id.
func TestErrorsBecomeTheStatusOfTheirReason(t *testing.T) {
	hint := &partition.Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, Message: "not the leader", Retryable: true,
		LeaderID: "n2", LeaderAddress: "10.0.0.2:7400"}
	for _, c := range []struct {
		name      string
		err       error
		code      codes.Code
		reason    raftbusv1.ErrorReason
		retryable bool
	}{
		{"engine", &engine.Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST, Message: "lock expired"},
			codes.FailedPrecondition, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST, false},
		{"partition", hint, codes.Unavailable, raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, true},
		{"quota", apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED, "full"),
			codes.ResourceExhausted, raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED, true},
		{"forwarded", apierror.Status(apierror.NotFound("no such queue")), codes.NotFound, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, false},
		{"canceled", context.Canceled, codes.Unavailable, raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, true},
		{"plain", errors.New("disk on fire"), codes.Internal, raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, false},
	} {
		_, err := StatusInterceptor(slog.New(slog.DiscardHandler))(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: raftbusv1.MessagingService_Send_FullMethodName},
			func(context.Context, any) (any, error) { return nil, c.err })
		st := status.Convert(err)
		info := apierror.Info(err)
		if st.Code() != c.code || !apierror.HasInfo(st) || info.GetReason() != c.reason || info.GetRetryable() != c.retryable || info.GetTrackingId() == "" {
			t.Errorf("%s: %v with %v; want %v, reason %v, retryable %v", c.name, st.Code(), info, c.code, c.reason, c.retryable)
		}
	}
	if info := apierror.Info(apierror.Status(hint)); info.GetLeader().GetAddress() != "10.0.0.2:7400" {
		t.Errorf("NOT_LEADER lost its leader: %v", info)
	}

	_, err := StatusInterceptor(slog.New(slog.DiscardHandler))(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: raftbusv1.MessagingService_Send_FullMethodName},
		func(context.Context, any) (any, error) { panic("a bug") })
	if st := status.Convert(err); st.Code() != codes.Internal || apierror.Info(err).GetTrackingId() == "" {
		t.Errorf("a panic: %v; want INTERNAL with a tracking id", err)
	}
}

// A stream's failure reaches the client as the status of its reason, and
// a panic serving it is INTERNAL with a tracking id, as for a unary call.
func TestStreamErrorsBecomeTheStatusOfTheirReason(t *testing.T) {
	intercept := StatusStreamInterceptor(slog.New(slog.DiscardHandler))
	info := &grpc.StreamServerInfo{FullMethod: raftbusv1.MessagingService_ReceiveStream_FullMethodName}
	err := intercept(nil, nil, info, func(any, grpc.ServerStream) error {
		return &engine.Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, Message: "no such queue"}
	})
	if st := status.Convert(err); st.Code() != codes.NotFound || apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("a stream failing with NOT_FOUND ended with %v", err)
	}
	err = intercept(nil, nil, info, func(any, grpc.ServerStream) error { panic("bug") })
	if st := status.Convert(err); st.Code() != codes.Internal || apierror.Info(err).GetTrackingId() == "" {
		t.Fatalf("a stream that panicked ended with %v, want INTERNAL with a tracking id", err)
	}
}
