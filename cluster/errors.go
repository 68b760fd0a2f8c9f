package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// apiError is a failure on its way to a client: every error the services
// return is one, turned into a gRPC status with an ErrorInfo by toStatus.
type apiError struct {
	reason    raftbusv1.ErrorReason
	msg       string
	retryable bool
	leader    *raftbusv1.LeaderHint
}

func (e *apiError) Error() string { return e.msg }

func errorf(reason raftbusv1.ErrorReason, format string, args ...any) *apiError {
	return &apiError{reason: reason, msg: fmt.Sprintf(format, args...), retryable: reason.Retryable()}
}

func invalid(format string, args ...any) *apiError {
	return errorf(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, format, args...)
}

func notFound(format string, args ...any) *apiError {
	return errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, format, args...)
}

func busy(format string, args ...any) *apiError {
	return errorf(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, format, args...)
}

// asAPIError classifies any error of the layers below.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		return errorf(ee.Reason, "%s", ee.Message)
	}
	var pe *partition.Error
	if errors.As(err, &pe) {
		e := &apiError{reason: pe.Reason, msg: pe.Message, retryable: pe.Retryable}
		if pe.LeaderAddress != "" {
			e.leader = &raftbusv1.LeaderHint{NodeId: pe.LeaderID, Address: pe.LeaderAddress}
		}
		return e
	}
	if st, ok := status.FromError(err); ok && err != nil {
		// A status from a forwarded call keeps its ErrorInfo.
		for _, d := range st.Details() {
			if info, ok := d.(*raftbusv1.ErrorInfo); ok {
				return &apiError{reason: info.Reason, msg: info.Message, retryable: info.Retryable, leader: info.Leader}
			}
		}
		switch st.Code() {
		case codes.DeadlineExceeded, codes.Canceled:
			return errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "%s", st.Message())
		case codes.Unavailable:
			// The transport failed. Unless the caller knows the request
			// never left (see forwardError), it may have been applied.
			return errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "%s; it may or may not have taken effect", st.Message())
		}
		return &apiError{reason: raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, msg: st.Message()}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "%v before the operation was known to complete", err)
	}
	return &apiError{reason: raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, msg: err.Error()}
}

// toStatus is the one place an error becomes what a client sees.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	if st, ok := status.FromError(err); ok {
		if hasErrorInfo(st) {
			return err
		}
		code = st.Code()
	}
	info := apiErrorInfo(err)
	if info.Reason != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED || code == codes.Unknown {
		code = info.Reason.StatusCode()
	}
	st, derr := status.New(code, info.Message).WithDetails(info)
	if derr != nil {
		return status.Error(code, info.Message)
	}
	return st.Err()
}

// apiErrorInfo is what a client learns of err: in a status (toStatus), or as
// the outcome of one item of a call that has one per item (Settle).
func apiErrorInfo(err error) *raftbusv1.ErrorInfo {
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*raftbusv1.ErrorInfo); ok {
				return info
			}
		}
	}
	e := asAPIError(err)
	return &raftbusv1.ErrorInfo{
		Reason:     e.reason,
		Message:    e.msg,
		TrackingId: trackingID(),
		Retryable:  e.retryable,
		Leader:     e.leader,
	}
}

func hasErrorInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*raftbusv1.ErrorInfo); ok {
			return true
		}
	}
	return false
}

func trackingID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unimplemented answers the RPCs of features the cluster does not serve yet.
func unimplemented(what string) error {
	return status.Error(codes.Unimplemented, what+" is not supported yet")
}

// statusInterceptor turns every error into a status with ErrorInfo and any
// panic into INTERNAL, logged with its stack, so no client ever sees a raw
// panic or an opaque error and no request can take the node down.
func statusInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		if strings.HasPrefix(info.FullMethod, "/raftbus.raft.") {
			// The Raft transport speaks plain gRPC codes to its peers.
			return handler(ctx, req)
		}
		defer func() {
			if r := recover(); r != nil {
				id := trackingID()
				log.Error("panic serving request", "method", info.FullMethod, "panic", fmt.Sprint(r), "tracking_id", id, "stack", string(debug.Stack()))
				st, _ := status.New(codes.Internal, "internal error").WithDetails(&raftbusv1.ErrorInfo{
					Reason: raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, Message: "internal error (tracking id " + id + ")", TrackingId: id,
				})
				resp, err = nil, st.Err()
			}
		}()
		resp, err = handler(ctx, req)
		return resp, deadlineCode(ctx, toStatus(err))
	}
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
	if st.Code() == codes.DeadlineExceeded || asAPIError(err).reason != raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN {
		return err
	}
	p := st.Proto()
	p.Code = int32(codes.DeadlineExceeded)
	return status.FromProto(p).Err()
}
