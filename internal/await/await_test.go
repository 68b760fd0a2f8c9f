package await

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var polls atomic.Int32
	Until(t, 5*time.Second, "the third poll", func() bool { return polls.Add(1) == 3 })
	if polls.Load() != 3 {
		t.Fatalf("%d polls", polls.Load())
	}
}

type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestUntilFailsTheTestAtTheDeadline(t *testing.T) {
	f := &fatal{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Until did not fail the test: %v", r)
			}
		}()
		Until(f, 30*time.Millisecond, "never", func() bool { return false })
	}()
	if time.Since(start) < 30*time.Millisecond || f.msg == "" {
		t.Fatalf("failed after %v with %q", time.Since(start), f.msg)
	}
}

func TestBackoffGrowsToItsCap(t *testing.T) {
	if Backoff(0) != time.Millisecond || Backoff(3) != 8*time.Millisecond || Backoff(6) != 50*time.Millisecond || Backoff(100) != 50*time.Millisecond {
		t.Fatalf("backoff %v %v %v %v", Backoff(0), Backoff(3), Backoff(6), Backoff(100))
	}
}
