package service

import (
	"time"

	"github.com/raftbus/raftbus/cluster/apierror"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// round is one round of asking partitions (or sources that stand for
// several) in turn, by the rule every call across partitions follows: a
// partition that fails (no leader, unreachable) does not keep the others
// from serving, and its failure is the answer only when none answered in
// the round. A failure whose outcome is unknown ends the search at once:
// that partition may have handed something out, and the caller must learn
// it may have (a receive is then replayed by its receive id).
type round struct {
	answered bool
	failed   error
}

// heard records one partition's answer, found saying that it had what
// was asked for, and reports whether that ends the search: it does when
// found, or when err is an unknown outcome.
func (r *round) heard(found bool, err error) (end bool) {
	switch {
	case err == nil && found:
		return true
	case err == nil:
		r.answered = true
	case apierror.IsUnknownOutcome(err):
		return true
	default:
		r.failed = err
	}
	return false
}

// firstAcross asks the partitions of an entity in order (see
// Messaging.pollOrder), or sources that stand for several (see
// Messaging.sources), for something (messages, a session) until one has
// it or wait ends: one round without waiting, then waits of up to
// pollSlice on each in turn. ask reports what it found and whether it
// found anything.
func firstAcross[S, T any](order []S, wait time.Duration,
	ask func(s S, wait time.Duration) (T, bool, error),
) (T, error) {
	var zero T
	deadline := time.Now().Add(wait)
	for pass := 0; ; pass++ {
		var rd round
		for _, s := range order {
			var slice time.Duration
			switch {
			case len(order) == 1:
				slice = time.Until(deadline)
			case pass > 0:
				slice = min(time.Until(deadline), pollSlice)
			}
			got, ok, err := ask(s, max(slice, 0))
			if rd.heard(ok, err) {
				if err != nil {
					return zero, err
				}
				return got, nil
			}
		}
		if !rd.answered {
			return zero, rd.failed
		}
		if !time.Now().Before(deadline) {
			return zero, nil
		}
	}
}

// pollOrder is the order in which a call across e's partitions asks them:
// first those this node leads (served here, with no hop to another node),
// then the others, each group starting at the next in turn so that no
// partition is starved.
func (s *Messaging) pollOrder(e *clusterv1.Entity) []uint32 {
	parts := uint32(len(e.GetPartitions()))
	start := s.rr.pick(parts)
	order := make([]uint32, 0, parts)
	var remote []uint32
	for k := range parts {
		id := (start + k) % parts
		if r := s.node.Replica(e, id); r != nil && r.IsLeader() {
			order = append(order, id)
		} else {
			remote = append(remote, id)
		}
	}
	return append(order, remote...)
}
