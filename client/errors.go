package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/internal/rpcreach"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Code is the stable reason of a failure: the values of
// raftbus.v1.ErrorReason. Switch on it, or use errors.Is with the Err...
// values below.
type Code int32

// The reasons a call fails with (see proto/raftbus/v1/errors.proto).
const (
	CodeUnspecified           = Code(raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	CodeNotFound              = Code(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	CodeAlreadyExists         = Code(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS)
	CodeInvalidArgument       = Code(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	CodeLockLost              = Code(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST)
	CodeSessionLockLost       = Code(raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST)
	CodeSessionCannotBeLocked = Code(raftbusv1.ErrorReason_ERROR_REASON_SESSION_CANNOT_BE_LOCKED)
	CodeQuotaExceeded         = Code(raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED)
	CodeMessageSizeExceeded   = Code(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED)
	CodeNotLeader             = Code(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER)
	CodeServerBusy            = Code(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY)
	CodeUnauthorized          = Code(raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED)
	CodeOutcomeUnknown        = Code(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN)
)

// String is the reason's name without its prefix, e.g. "NOT_FOUND".
func (c Code) String() string {
	name := raftbusv1.ErrorReason(c).String()
	const prefix = "ERROR_REASON_"
	if len(name) > len(prefix) && name[:len(prefix)] == prefix {
		return name[len(prefix):]
	}
	return name
}

// Values to compare errors with: errors.Is(err, client.ErrLockLost) holds
// for every *Error with that Code.
var (
	ErrNotFound              = &Error{Code: CodeNotFound}
	ErrAlreadyExists         = &Error{Code: CodeAlreadyExists}
	ErrLockLost              = &Error{Code: CodeLockLost}
	ErrSessionLockLost       = &Error{Code: CodeSessionLockLost}
	ErrSessionCannotBeLocked = &Error{Code: CodeSessionCannotBeLocked}
	ErrQuotaExceeded         = &Error{Code: CodeQuotaExceeded}
	ErrMessageSizeExceeded   = &Error{Code: CodeMessageSizeExceeded}
	ErrOutcomeUnknown        = &Error{Code: CodeOutcomeUnknown}
	ErrUnauthorized          = &Error{Code: CodeUnauthorized}
)

// Error is every failure the broker reports, and the client's own checks
// (a message too large for a batch, a closed client).
type Error struct {
	// Code is the stable reason.
	Code Code
	// Message explains the failure.
	Message string
	// TrackingID identifies the failure in the server's logs.
	TrackingID string
	// Retryable tells whether repeating the call can succeed. The client
	// has already retried what it could within RetryOptions.
	Retryable bool
	// Status is the gRPC status code (e.g. codes.Unimplemented for a
	// feature the server does not offer yet).
	Status codes.Code

	leaderAddr string
	// unreached is set when the call never got to its node (see
	// callError).
	unreached bool
	// node is the address of the node the call went to, when one was
	// called.
	node string
	// attempts is the trail of an operation the client tried more than
	// once, or after a request shared with other callers (see
	// Client.retryAfter).
	attempts []Attempt
}

// Attempt is one try the client made at an operation: where it went, what
// it met, and whether it may have taken effect there.
type Attempt struct {
	// Node is the address called, "" when the attempt failed before it
	// called a node (the routing table could not be had).
	Node string
	// Err is what the attempt failed with.
	Err string
	// MayHaveTakenEffect is set when the attempt may have reached a node
	// that could apply it (its outcome is unknown): the operation as a
	// whole then has an unknown outcome.
	MayHaveTakenEffect bool
}

func (a Attempt) String() string {
	node, verdict := a.Node, "did nothing"
	if node == "" {
		node = "no node"
	}
	if a.MayHaveTakenEffect {
		verdict = "may have taken effect"
	}
	return fmt.Sprintf("%s, %s: %s", node, verdict, a.Err)
}

// Attempts is the trail of the operation that failed with e, first
// attempt first: empty unless the client tried it more than once (or
// first as part of a request shared with other callers).
func (e *Error) Attempts() []Attempt { return append([]Attempt(nil), e.attempts...) }

func (e *Error) Error() string {
	s := e.text()
	if e.node != "" {
		s += " (node " + e.node + ")"
	}
	if len(e.attempts) > 0 {
		s += " [attempts:"
		for i, a := range e.attempts {
			s += fmt.Sprintf(" %d) %s;", i+1, a)
		}
		s = s[:len(s)-1] + "]"
	}
	return s
}

// text is the error without the node and the trail.
func (e *Error) text() string {
	s := fmt.Sprintf("raftbus: %s: %s", e.Code, e.Message)
	if e.Code == CodeUnspecified && e.Status != codes.OK && e.Status != codes.Unknown {
		s = fmt.Sprintf("raftbus: %s: %s", e.Status, e.Message)
	}
	if e.TrackingID != "" {
		s += " (tracking id " + e.TrackingID + ")"
	}
	return s
}

// maxAttemptText bounds what the trail keeps of one attempt's failure.
const maxAttemptText = 300

// attemptOf is what err says of one attempt.
func attemptOf(err error) Attempt {
	var e *Error
	if !errors.As(err, &e) {
		return Attempt{Err: truncate(err.Error()), MayHaveTakenEffect: errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)}
	}
	return Attempt{Node: e.node, Err: truncate(e.text()), MayHaveTakenEffect: e.Code == CodeOutcomeUnknown}
}

func truncate(s string) string {
	if len(s) > maxAttemptText {
		return s[:maxAttemptText] + "..."
	}
	return s
}

// withTrail is a copy of e carrying trail (e may be shared: the failure of
// a request that carried several callers' work).
func withTrail(e *Error, trail []Attempt) *Error {
	c := *e
	c.attempts = append([]Attempt(nil), trail...)
	return &c
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// asError turns what a gRPC call returned into an *Error. Context errors
// of the caller pass through unchanged so errors.Is(err,
// context.DeadlineExceeded) keeps working.
func asError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Code: CodeUnspecified, Message: err.Error()}
	}
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return errorOfInfo(info, st.Code())
		}
	}
	e = &Error{Code: CodeUnspecified, Message: st.Message(), Status: st.Code()}
	switch st.Code() {
	case codes.Unavailable:
		// The connection failed; unless the caller knows the request never
		// left (see callError), it may have reached the server.
		e.Code, e.Message, e.Retryable = CodeOutcomeUnknown, "connection failed: "+st.Message()+"; the call may or may not have taken effect", true
	case codes.DeadlineExceeded, codes.Canceled:
		e.Code = CodeOutcomeUnknown
	case codes.NotFound:
		e.Code = CodeNotFound
	case codes.InvalidArgument:
		e.Code = CodeInvalidArgument
	}
	return e
}

// errorOfInfo is the *Error of an ErrorInfo that came with status code
// (codes.Unknown: none, as for one item of a Settle; the reason's own
// code is used).
func errorOfInfo(info *raftbusv1.ErrorInfo, code codes.Code) *Error {
	if code == codes.Unknown {
		code = info.GetReason().StatusCode()
	}
	return &Error{
		Code:       Code(info.GetReason()),
		Message:    info.GetMessage(),
		TrackingID: info.GetTrackingId(),
		Retryable:  info.GetRetryable(),
		Status:     code,
		leaderAddr: info.GetLeader().GetAddress(),
	}
}

// callError is asError for a call made through conn to the node at addr:
// a connection failure of a call that never got as far as a connection to
// the server (see package rpcreach) did nothing, and may be sent anywhere
// again; a failure that no node answered (a status without ErrorInfo) of
// a call that may have reached it is of unknown outcome when it may have
// come after the node handled the call (see garbled).
func callError(err error, conn *rpcreach.Conn, addr string) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && !hasErrorInfo(st) {
		switch {
		case st.Code() == codes.Unavailable && !conn.MaybeSent():
			return &Error{Code: CodeServerBusy, Message: "node unreachable: " + st.Message(), Retryable: true, Status: codes.Unavailable, unreached: true, node: addr}
		case garbled(st.Code()) && conn.MaybeSent():
			return &Error{Code: CodeOutcomeUnknown, Message: fmt.Sprintf("the call failed after it may have reached the node (%s: %s); it may or may not have taken effect", st.Code(), st.Message()),
				Retryable: true, Status: st.Code(), node: addr}
		}
	}
	e := asError(err)
	if ce, ok := e.(*Error); ok && ce.node == "" && addr != "" {
		c := *ce
		c.node = addr
		return &c
	}
	return e
}

// garbled tells the codes of a failure that no node answered (no
// ErrorInfo: every answer of a raftbus node has one) which can come after
// the node handled the call: its stream reset (INTERNAL_ERROR and other
// HTTP/2 errors), an answer that could not be read, or one that did not
// match the request.
func garbled(c codes.Code) bool {
	return c == codes.Internal || c == codes.Unknown || c == codes.DataLoss
}

func hasErrorInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*raftbusv1.ErrorInfo); ok {
			return true
		}
	}
	return false
}
