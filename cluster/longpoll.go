package cluster

import (
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// firstAcross asks the parts partitions of an entity for something
// (messages, a session) until one has it or wait ends: one pass without
// waiting, starting at partition start (the next in turn, so that none is
// starved), then waits of up to pollSlice on each in turn. ask reports what it found and
// whether it found anything.
//
// A partition that fails (no leader, unreachable) does not keep the others
// from serving: its failure is the answer only when no partition answered
// in a pass. A failure whose outcome is unknown ends the search at once:
// that partition may have handed something out, and the caller must learn
// it may have (a receive is then replayed by its receive id).
func firstAcross[T any](start, parts uint32, wait time.Duration,
	ask func(id uint32, wait time.Duration) (T, bool, error),
) (T, error) {
	var zero T
	deadline := time.Now().Add(wait)
	for pass := 0; ; pass++ {
		var failed error
		answered := false
		for k := uint32(0); k < parts; k++ {
			id := (start + k) % parts
			var slice time.Duration
			switch {
			case parts == 1:
				slice = time.Until(deadline)
			case pass > 0:
				slice = min(time.Until(deadline), pollSlice)
			}
			got, ok, err := ask(id, max(slice, 0))
			switch {
			case err == nil && ok:
				return got, nil
			case err == nil:
				answered = true
			case asAPIError(err).reason == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
				return zero, err
			default:
				failed = err
			}
		}
		if !answered {
			return zero, failed
		}
		if !time.Now().Before(deadline) {
			return zero, nil
		}
	}
}
