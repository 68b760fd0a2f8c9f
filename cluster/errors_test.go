package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/cluster/apierror"
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
	s := &messagingService{}
	long := strings.Repeat("é", maxDeadLetterText+1)
	for _, req := range []*raftbusv1.DeadLetterRequest{{Reason: long}, {ErrorDescription: long}} {
		_, err := s.DeadLetter(context.Background(), req)
		if apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("dead-letter with %d characters: %v, want INVALID_ARGUMENT", maxDeadLetterText+1, err)
		}
	}
}
