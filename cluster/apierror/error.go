package apierror

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Error is a failure on its way to a client: every error the services
// return is one, turned into a gRPC status with an ErrorInfo by Status.
type Error struct {
	Reason    raftbusv1.ErrorReason
	Message   string
	Retryable bool
	// Leader names the leader to ask instead, for NOT_LEADER, when known.
	Leader *raftbusv1.LeaderHint
}

func (e *Error) Error() string { return e.Message }

// Errorf is a failure for reason, retryable as the reason is.
func Errorf(reason raftbusv1.ErrorReason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Retryable: reason.Retryable()}
}

// Invalid is INVALID_ARGUMENT: the request can never succeed as it is.
func Invalid(format string, args ...any) *Error {
	return Errorf(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, format, args...)
}

// NotFound is NOT_FOUND.
func NotFound(format string, args ...any) *Error {
	return Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, format, args...)
}

// Busy is SERVER_BUSY: nothing was done, and trying again (here or at
// another node) may succeed.
func Busy(format string, args ...any) *Error {
	return Errorf(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, format, args...)
}

// From classifies any error of the layers below.
func From(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		return Errorf(ee.Reason, "%s", ee.Message)
	}
	var pe *partition.Error
	if errors.As(err, &pe) {
		e := &Error{Reason: pe.Reason, Message: pe.Message, Retryable: pe.Retryable}
		if pe.LeaderAddress != "" {
			e.Leader = &raftbusv1.LeaderHint{NodeId: pe.LeaderID, Address: pe.LeaderAddress}
		}
		return e
	}
	if st, ok := status.FromError(err); ok && err != nil {
		// A status from a forwarded call keeps its ErrorInfo.
		for _, d := range st.Details() {
			if info, ok := d.(*raftbusv1.ErrorInfo); ok {
				return &Error{Reason: info.Reason, Message: info.Message, Retryable: info.Retryable, Leader: info.Leader}
			}
		}
		switch st.Code() {
		case codes.DeadlineExceeded, codes.Canceled:
			return Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "%s", st.Message())
		case codes.Unavailable:
			// The transport failed. Unless the caller knows the request
			// never left (see routing.ForwardError), it may have been
			// applied.
			return Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "%s; it may or may not have taken effect", st.Message())
		}
		return &Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, Message: st.Message()}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "%v before the operation was known to complete", err)
	}
	return &Error{Reason: raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED, Message: err.Error()}
}

// IsUnknownOutcome reports whether err leaves open whether the operation
// took effect.
func IsUnknownOutcome(err error) bool {
	return From(err).Reason == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN
}
