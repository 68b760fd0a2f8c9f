package engine

import (
	"fmt"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Error is a failure with a stable reason code, returned by the read methods
// and carried by Error results of Apply.
type Error struct {
	Reason  raftbusv1.ErrorReason
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(reason raftbusv1.ErrorReason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) *Error {
	return errorf(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, format, args...)
}

func notFound(path string) *Error {
	return errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "entity %q does not exist in this partition", path)
}

func lockLost(token lockToken) *Error {
	return errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST,
		"lock token %x is unknown or its lock expired; the message may have been delivered again", token[:])
}

func errorResult(err *Error) *enginev1.Result {
	return &enginev1.Result{Result: &enginev1.Result_Error{Error: &enginev1.Error{Reason: err.Reason, Message: err.Message}}}
}
