// Package await is how tests wait for a condition that no event signals:
// a replica catching up, a leader being elected, a process answering. It
// polls, with a short backoff, until the condition holds or a deadline
// passes, and then fails the test saying what it waited for.
package await

import (
	"testing"
	"time"
)

// Until polls cond until it holds, failing t with what was awaited once
// timeout has passed.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 0; !cond(); attempt++ {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(Backoff(attempt))
	}
}

// Backoff is the pause before poll attempt+1: from 1 ms, doubling, at
// most 50 ms, so that a condition that holds soon is seen soon and one
// that takes seconds costs few polls.
func Backoff(attempt int) time.Duration {
	return min(time.Millisecond<<min(attempt, 6), 50*time.Millisecond)
}
