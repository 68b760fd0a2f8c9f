package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
)

// RetryOptions bound how the client retries failures the server marks
// retryable (no leader yet, a leader change, a busy node). Zero fields take
// the defaults written next to them.
type RetryOptions struct {
	// MaxRetries is the number of retries after the first attempt.
	// Default 8; negative: no retries.
	MaxRetries int
	// RetryDelay is the first backoff, doubled on each retry with up to
	// ±50% jitter. Default 100ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the backoff. Default 2s.
	MaxRetryDelay time.Duration
}

func (o RetryOptions) withDefaults() RetryOptions {
	if o.MaxRetries == 0 {
		o.MaxRetries = 8
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 100 * time.Millisecond
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 2 * time.Second
	}
	return o
}

// delay is the backoff before retry number n (0-based), with jitter so
// that many clients do not retry in step.
func (o RetryOptions) delay(n int) time.Duration {
	d := o.RetryDelay
	for i := 0; i < n && d < o.MaxRetryDelay; i++ {
		d *= 2
	}
	d = min(d, o.MaxRetryDelay)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

// retry runs op until it succeeds, fails for good, the retries are spent
// or ctx ends. unknownIsSafe says whether op may be repeated after
// OUTCOME_UNKNOWN: true for operations whose repetition changes nothing
// more than the first (reads, settlement, lock renewal), false for sends
// without message ids and other changes, whose OUTCOME_UNKNOWN goes to the
// caller at once. A NOT_LEADER with the leader's address is followed at
// once, without backoff, a few times.
func (c *Client) retry(ctx context.Context, unknownIsSafe bool, op func(ctx context.Context, attempt int) error) error {
	return c.retryAfter(ctx, nil, unknownIsSafe, op)
}

// retryAfter is retry for an operation whose first attempt was made
// elsewhere and failed with first (a request carrying the work of several
// callers, see sendCoalesced): first counts as attempt 0, so that its
// unknown outcome stays unknown whatever the later attempts meet.
func (c *Client) retryAfter(ctx context.Context, first *Error, unknownIsSafe bool, op func(ctx context.Context, attempt int) error) error {
	opts := c.opts.RetryOptions
	redirects := 0
	// unknown is the last OUTCOME_UNKNOWN seen. A repeated settlement that
	// then finds its lock gone most likely found it gone because the
	// first attempt settled it; a repeated send that finds the entity
	// gone or the node busy may follow one that took effect.
	var unknown *Error
	// trail is what each attempt met, for the caller's error: an operation
	// tried at several nodes fails with the last failure (or the unknown
	// outcome of an earlier one), and the others tell how it got there.
	var trail []Attempt
	// last is the last failure an attempt met.
	var last *Error
	// fail is how the loop ends on err: once an attempt's outcome is
	// unknown, no later failure can say that nothing happened, so the
	// caller hears that the outcome is unknown.
	fail := func(err error) error {
		if unknown == nil {
			return traced(err, trail)
		}
		var e *Error
		if errors.As(err, &e) && e.Code == CodeOutcomeUnknown {
			return traced(err, trail)
		}
		if ctx.Err() != nil {
			return traced(&gaveUpError{ctx.Err(), unknown}, trail)
		}
		return traced(unknown, trail)
	}
	for attempt, backoffs := 0, 0; ; attempt++ {
		var err error
		if attempt == 0 && first != nil {
			err = first
		} else {
			err = op(ctx, attempt)
		}
		if err == nil {
			return nil
		}
		trail = append(trail, attemptOf(err))
		var e *Error
		if !errors.As(err, &e) {
			if last != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// The deadline came as the attempt looked for where to
				// go (a routing lookup): the caller hears of the last
				// failure too, not of its context alone.
				return fail(&gaveUpError{ctx.Err(), last})
			}
			return fail(err)
		}
		last = e
		if e.Code == CodeOutcomeUnknown {
			unknown = e
			awaitOwnDeadline(ctx, e)
		}
		if ctx.Err() != nil {
			return fail(&gaveUpError{ctx.Err(), e})
		}
		if !e.Retryable || errors.Is(e, errClosed) {
			return fail(e)
		}
		if e.Code == CodeOutcomeUnknown && !unknownIsSafe {
			return fail(e)
		}
		if e.Code == CodeNotLeader && e.leaderAddr != "" && redirects < 3 {
			redirects++
			continue
		}
		if backoffs >= opts.MaxRetries {
			return fail(e)
		}
		t := time.NewTimer(opts.delay(backoffs))
		backoffs++
		select {
		case <-ctx.Done():
			t.Stop()
			return fail(&gaveUpError{ctx.Err(), e})
		case <-t.C:
		}
	}
}

// gaveUpError is the caller's context ending while the client retried: it
// is both the context's error (errors.Is(err, context.DeadlineExceeded))
// and the last failure (errors.As(err, &clientErr)).
type gaveUpError struct {
	ctxErr error
	last   *Error
}

func (g *gaveUpError) Error() string {
	return fmt.Sprintf("%v while retrying; last failure: %v", g.ctxErr, g.last)
}

func (g *gaveUpError) Unwrap() []error { return []error{g.ctxErr, g.last} }

// traced is err carrying the trail of the attempts of the operation it
// ends, when there was more than one or the first was shared with other
// callers (a trail of one says no more than err).
func traced(err error, trail []Attempt) error {
	if len(trail) < 2 {
		return err
	}
	switch e := err.(type) {
	case *Error:
		return withTrail(e, trail)
	case *gaveUpError:
		return &gaveUpError{e.ctxErr, withTrail(e.last, trail)}
	}
	return err
}

// deadlineSkew is how far apart the caller's deadline and the end of a
// call cut short by it are seen.
const deadlineSkew = 50 * time.Millisecond

// awaitOwnDeadline waits for ctx to end when e is a call that ended at
// ctx's deadline: the server (or gRPC's own timer) may see the deadline a
// moment before ctx does, and then the caller must still hear that its
// deadline passed, not that the call failed on its own.
func awaitOwnDeadline(ctx context.Context, e *Error) {
	d, ok := ctx.Deadline()
	if !ok || ctx.Err() != nil || (e.Status != codes.DeadlineExceeded && e.Status != codes.Canceled) || time.Until(d) > deadlineSkew {
		return
	}
	t := time.NewTimer(time.Until(d) + deadlineSkew)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
