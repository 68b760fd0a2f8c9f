package mgmtapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Failures are answered as Service Bus answers them, an HTTP status and
// <Error><Code>status</Code><Detail>why</Detail></Error>, so that each
// SDK raises what it raises against Service Bus: 404 and 409 are
// Python's ResourceNotFoundError and ResourceExistsError, .NET's
// MessagingEntityNotFound and MessagingEntityAlreadyExists; 401 an
// authorization failure; 400 an argument error; 403 a quota; 429 and 503
// are retried.

// httpError is a failure with its HTTP status.
type httpError struct {
	status int
	detail string
}

func (e *httpError) Error() string { return e.detail }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, detail: fmt.Sprintf(format, args...)}
}

// toHTTPError classifies err: one of ours as it is, a failure of the
// cluster by its reason.
func toHTTPError(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	e := apierror.From(err)
	status := http.StatusInternalServerError
	switch e.Reason {
	case raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND:
		status = http.StatusNotFound
	case raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS:
		status = http.StatusConflict
	case raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED:
		status = http.StatusBadRequest
	case raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED:
		// Service Bus answers a missing right with 401 too
		// ("Manage,EntityRead claims required for this operation").
		status = http.StatusUnauthorized
	case raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED:
		status = http.StatusForbidden
	case raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER,
		raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
		status = http.StatusServiceUnavailable
	default:
		if e.Retryable {
			status = http.StatusServiceUnavailable
		}
	}
	return &httpError{status: status, detail: e.Message}
}

// writeError answers he and returns its tracking id: the detail ends
// with it, as Service Bus's do, so that a failure a client reports can
// be found in the node's log.
func writeError(w http.ResponseWriter, r *http.Request, he *httpError) string {
	id := apierror.TrackingID()
	detail := strings.TrimSuffix(he.detail, ".") + fmt.Sprintf(". TrackingId:%s, SystemTracker:%s%s, Timestamp:%s",
		id, r.Host, r.URL.Path, formatTime(time.Now()))
	if he.status == http.StatusTooManyRequests || he.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	var x xmlWriter
	x.open("Error")
	x.leaf("Code", fmt.Sprint(he.status))
	x.leaf("Detail", detail)
	x.close("Error")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(he.status)
	fmt.Fprint(w, x.String())
	return id
}
