package main

import (
	"context"
	"errors"
	"testing"

	"github.com/raftbus/raftbus/client"
)

func TestBenchGoesOnPastErrorsARetryCanGetPast(t *testing.T) {
	var tally errorTally
	unknown := &client.Error{Code: client.CodeOutcomeUnknown, Message: "leadership lost while committing log", Retryable: true}
	invalid := &client.Error{Code: client.CodeInvalidArgument, Message: "bad"}
	live, done := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	if err := retried(live, unknown, tally.add); err != nil {
		t.Fatalf("an unknown outcome ended the consumer: %v", err)
	}
	if err := retried(live, invalid, tally.add); !errors.Is(err, invalid) {
		t.Fatalf("INVALID_ARGUMENT: %v, want it returned", err)
	}
	if err := retried(done, invalid, tally.add); err != nil {
		t.Fatalf("an error after the run: %v, want it ignored", err)
	}
	n, reasons, samples := tally.report()
	if n != 1 || reasons["OUTCOME_UNKNOWN"] != 1 || samples["OUTCOME_UNKNOWN"] != unknown.Error() {
		t.Fatalf("tally %d %v %v, want the one unknown outcome", n, reasons, samples)
	}
}
