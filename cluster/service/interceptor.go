package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// StatusInterceptor turns every error into a status with ErrorInfo and any
// panic into INTERNAL, logged with its stack, so no client ever sees a raw
// panic or an opaque error and no request can take the node down. It
// serves every call of the node's server but the Raft transport's.
func StatusInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		if strings.HasPrefix(info.FullMethod, "/raftbus.raft.") {
			// The Raft transport speaks plain gRPC codes to its peers.
			return handler(ctx, req)
		}
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, panicStatus(log, info.FullMethod, r)
			}
		}()
		resp, err = handler(ctx, req)
		return resp, deadlineCode(ctx, apierror.Status(err))
	}
}

// StatusStreamInterceptor is StatusInterceptor for streams (a
// ReceiveStream; the grants it serves go through the unary one too). gRPC's
// own streams (reflection) and the Raft transport's are left as they are.
func StatusStreamInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if strings.HasPrefix(info.FullMethod, "/raftbus.raft.") || strings.HasPrefix(info.FullMethod, "/grpc.") {
			return handler(srv, ss)
		}
		defer func() {
			if r := recover(); r != nil {
				err = panicStatus(log, info.FullMethod, r)
			}
		}()
		return apierror.Status(handler(srv, ss))
	}
}

// panicStatus logs a panic serving method, with its stack, and is the
// INTERNAL status the client gets instead, with a tracking id that names
// the log line.
func panicStatus(log *slog.Logger, method string, r any) error {
	id := apierror.TrackingID()
	log.Error("panic serving request", "method", method, "panic", fmt.Sprint(r), "tracking_id", id, "stack", string(debug.Stack()))
	st, _ := status.New(codes.Internal, "internal error").WithDetails(&raftbusv1.ErrorInfo{
		Reason: raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, Message: "internal error (tracking id " + id + ")", TrackingId: id,
	})
	return st.Err()
}

// deadlineCode gives an unknown outcome that the caller's deadline caused
// gRPC's DeadlineExceeded code. The caller's context ends a moment after
// the server's (the deadline travels as a timeout), so without it a caller
// would see its call fail while its own deadline had not yet passed.
func deadlineCode(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	st := status.Convert(err)
	if st.Code() == codes.DeadlineExceeded || !apierror.IsUnknownOutcome(err) {
		return err
	}
	p := st.Proto()
	p.Code = int32(codes.DeadlineExceeded)
	return status.FromProto(p).Err()
}
