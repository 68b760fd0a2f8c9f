package service

import (
	"time"

	"github.com/raftbus/raftbus/cluster/apierror"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// firstAcross asks the partitions of an entity in order (see
// Messaging.pollOrder), or sources that stand for several (see Messaging.sources),
// for something (messages, a session) until one has it or wait ends: one
// pass without waiting, then waits of up to pollSlice on each in turn. ask reports what it found and whether it found anything.
//
// A partition that fails (no leader, unreachable) does not keep the others
// from serving: its failure is the answer only when no partition answered
// in a pass. A failure whose outcome is unknown ends the search at once:
// that partition may have handed something out, and the caller must learn
// it may have (a receive is then replayed by its receive id).
func firstAcross[S, T any](order []S, wait time.Duration,
	ask func(s S, wait time.Duration) (T, bool, error),
) (T, error) {
	var zero T
	deadline := time.Now().Add(wait)
	for pass := 0; ; pass++ {
		var failed error
		answered := false
		for _, s := range order {
			var slice time.Duration
			switch {
			case len(order) == 1:
				slice = time.Until(deadline)
			case pass > 0:
				slice = min(time.Until(deadline), pollSlice)
			}
			got, ok, err := ask(s, max(slice, 0))
			switch {
			case err == nil && ok:
				return got, nil
			case err == nil:
				answered = true
			case apierror.IsUnknownOutcome(err):
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
