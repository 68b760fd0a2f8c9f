package apierror

import (
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Status is the one place an error becomes what a client sees: a gRPC
// status with an ErrorInfo (a status that has one already is kept).
func Status(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	if st, ok := status.FromError(err); ok {
		if HasInfo(st) {
			return err
		}
		code = st.Code()
	}
	info := Info(err)
	if info.Reason != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED || code == codes.Unknown {
		code = info.Reason.StatusCode()
	}
	st, derr := status.New(code, info.Message).WithDetails(info)
	if derr != nil {
		return status.Error(code, info.Message)
	}
	return st.Err()
}

// Info is what a client learns of err: in a status (Status), or as the
// outcome of one item of a call that has one per item (Settle, SendEach).
func Info(err error) *raftbusv1.ErrorInfo {
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*raftbusv1.ErrorInfo); ok {
				return info
			}
		}
	}
	e := From(err)
	return &raftbusv1.ErrorInfo{
		Reason:     e.Reason,
		Message:    e.Message,
		TrackingId: TrackingID(),
		Retryable:  e.Retryable,
		Leader:     e.Leader,
	}
}

// HasInfo reports whether st carries an ErrorInfo: a node answered it
// itself, rather than the transport failing on the way.
func HasInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*raftbusv1.ErrorInfo); ok {
			return true
		}
	}
	return false
}

// TrackingID names one failure in the node's log and in the client's
// error alike.
func TrackingID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
