package checker

import (
	"fmt"
	"math"
	"sort"

	"github.com/raftbus/raftbus/test/history"
)

// Dead-letter reasons the broker gives (Service Bus's).
const (
	ReasonMaxDeliveryCount = "MaxDeliveryCountExceeded"
	ReasonTTLExpired       = "TTLExpiredException"
)

// tenure is one lock (of a message or a session): granted at some moment
// between grantStart and grantEnd (the receive or accept that took it),
// held at least until release, the earliest moment it may have ended: its
// locked-until (less the clock uncertainty, extended by acknowledged
// renewals) or the start of anything that may have released it.
type tenure struct {
	grantStart, grantEnd, release int64
	who                           string
}

// clash reports whether two locks on one thing were certainly held at the
// same time: neither can have been granted after the other ended.
func clash(a, b tenure) bool { return b.grantEnd < a.release && a.grantEnd < b.release }

// clashes lists every pair of ts that clashes.
func clashes(what string, ts []tenure) []string {
	var out []string
	for i := range ts {
		for j := i + 1; j < len(ts); j++ {
			if clash(ts[i], ts[j]) {
				out = append(out, fmt.Sprintf("%s held by %s and by %s at once", what, ts[i].who, ts[j].who))
			}
		}
	}
	return out
}

// messageLocks checks that no stored copy was locked by two receivers at
// the same time.
func (c *run) messageLocks() []string {
	var out []string
	for _, cp := range c.sortedCopies() {
		bySeq := make(map[int64][]tenure)
		var seqs []int64
		for _, d := range cp.deliveries {
			if !d.locked() || d.LockToken == "" || d.LockedUntil == 0 {
				continue
			}
			if _, ok := bySeq[d.Seq]; !ok {
				seqs = append(seqs, d.Seq)
			}
			bySeq[d.Seq] = append(bySeq[d.Seq], tenure{
				grantStart: d.start(), grantEnd: d.end(), release: c.lockRelease(cp, d),
				who: fmt.Sprintf("proc %d (received %v-%v, lock %.8s until %v)", d.op.Process, at(d.start()), at(d.end()), d.LockToken, at(d.LockedUntil)),
			})
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, seq := range seqs {
			out = append(out, clashes(fmt.Sprintf("%s in %s seq %d", cp.key.id, cp.key.entity, seq), bySeq[seq])...)
		}
	}
	return out
}

// lockRelease is the earliest moment d's lock may have ended. A message
// received under a session lock is locked as long as the session is:
// renewing the session lock renews its lock, and closing or losing the
// session ends it.
func (c *run) lockRelease(cp *copyOf, d *delivery) int64 {
	until := d.LockedUntil
	for _, s := range cp.settles {
		if s.Kind == history.RenewLock && s.LockToken == d.LockToken && s.Outcome == history.OK {
			until = max(until, s.LockedUntil)
		}
	}
	h := c.holdOf(d)
	if h != nil {
		until = max(until, h.acknowledgedUntil())
	}
	release := until - int64(c.opt.ClockUncertainty)
	for _, s := range cp.settles {
		if s.Kind != history.RenewLock && s.LockToken == d.LockToken && s.Outcome != history.Fail {
			release = min(release, s.Start)
		}
	}
	if h != nil {
		release = min(release, h.closedAt())
	}
	return release
}

// lockLatestEnd is the latest moment d's lock may have lasted to, when
// nothing released it: its locked-until, extended by renewals that may
// have happened (of its session's lock too, for a message received under
// one), plus the clock uncertainty.
func (c *run) lockLatestEnd(cp *copyOf, d *delivery) int64 {
	until := d.LockedUntil
	var longest int64
	for _, s := range c.settingsOf(cp.key.entity) {
		longest = max(longest, s.LockDuration)
	}
	renewed := func(s *history.Op) {
		switch s.Outcome {
		case history.OK:
			until = max(until, s.LockedUntil)
		case history.Unknown:
			until = max(until, c.actsUntil(s)+longest)
		}
	}
	for _, s := range cp.settles {
		if s.Kind == history.RenewLock && s.LockToken == d.LockToken {
			renewed(s)
		}
	}
	if h := c.holdOf(d); h != nil {
		until = max(until, h.accept.LockedUntil)
		for _, r := range h.renews {
			renewed(r)
		}
	}
	return until + int64(c.opt.ClockUncertainty)
}

// holdOf is the session hold d was received under, or nil.
func (c *run) holdOf(d *delivery) *hold {
	if h := c.holds[d.op.Lock]; d.op.Lock != "" && h != nil && h.accept != nil && h.accept.LockedUntil != 0 {
		return h
	}
	return nil
}

// acknowledgedUntil is the latest expiry the broker acknowledged for the
// session lock: at its accept or a renewal.
func (h *hold) acknowledgedUntil() int64 {
	until := h.accept.LockedUntil
	for _, r := range h.renews {
		if r.Outcome == history.OK {
			until = max(until, r.LockedUntil)
		}
	}
	return until
}

// closedAt is the earliest moment a close may have ended the session lock
// (never: MaxInt64).
func (h *hold) closedAt() int64 {
	at := int64(math.MaxInt64)
	for _, cl := range h.closes {
		if cl.Outcome != history.Fail {
			at = min(at, cl.Start)
		}
	}
	return at
}

// holdRelease is the earliest moment a session lock may have ended.
func (c *run) holdRelease(h *hold) int64 {
	if h.accept.LockedUntil == 0 {
		return math.MaxInt64
	}
	return min(h.acknowledgedUntil()-int64(c.opt.ClockUncertainty), h.closedAt())
}

// sessionLocks checks that no session was held by two receivers at once.
func (c *run) sessionLocks() []string {
	bySession := make(map[[2]string][]tenure)
	var keys [][2]string
	ids := make([]string, 0, len(c.holds))
	for id := range c.holds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		h := c.holds[id]
		if h.accept == nil || h.accept.LockedUntil == 0 {
			continue
		}
		k := [2]string{h.accept.Entity, h.accept.SessionID}
		if _, ok := bySession[k]; !ok {
			keys = append(keys, k)
		}
		a := h.accept
		bySession[k] = append(bySession[k], tenure{
			grantStart: a.Start, grantEnd: a.End, release: c.holdRelease(h),
			who: fmt.Sprintf("proc %d (hold %s accepted %v-%v, until %v)", a.Process, id, at(a.Start), at(a.End), at(a.LockedUntil)),
		})
	}
	var out []string
	for _, k := range keys {
		out = append(out, clashes(fmt.Sprintf("session %s of %s", k[1], k[0]), bySession[k])...)
	}
	return out
}

// deliveryCounts checks that each delivery of a stored copy raises its
// delivery count by one (a rise of more needs a receive nobody saw the
// answer of), that drains see no lower count than the deliveries did,
// and that MaxDeliveryCount sends a message to the dead-letter sub-queue
// when it is used up and not before.
func (c *run) deliveryCounts() []string {
	var out []string
	for _, cp := range c.sortedCopies() {
		m := c.messages[cp.key.id]
		lo, hi := c.maxDeliveries(cp.key.entity)
		bySeq := make(map[int64][]*delivery)
		for _, d := range cp.deliveries {
			bySeq[d.Seq] = append(bySeq[d.Seq], d)
		}
		seqs := make([]int64, 0, len(bySeq))
		for s := range bySeq {
			seqs = append(seqs, s)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, seq := range seqs {
			name := fmt.Sprintf("%s in %s seq %d", cp.key.id, cp.key.entity, seq)
			var taken, drained []*delivery
			for _, d := range bySeq[seq] {
				if d.drain {
					drained = append(drained, d)
				} else {
					taken = append(taken, d)
				}
			}
			sort.SliceStable(taken, func(i, j int) bool { return taken[i].DeliveryCount < taken[j].DeliveryCount })
			since := int64(0)
			if m != nil {
				since = m.firstStart()
			}
			prev := int32(0)
			var last *delivery
			for _, d := range taken {
				if last != nil && d.DeliveryCount == last.DeliveryCount {
					out = append(out, fmt.Sprintf("%s: delivery count %d given to two deliveries (procs %d at %v and %d at %v)",
						name, d.DeliveryCount, last.op.Process, at(last.end()), d.op.Process, at(d.end())))
				}
				if last != nil && d.end() < last.start() {
					out = append(out, fmt.Sprintf("%s: delivery at %v has count %d, one after it at %v has %d",
						name, at(d.end()), d.DeliveryCount, at(last.start()), last.DeliveryCount))
				}
				if missing := int(d.DeliveryCount - prev - 1); missing > 0 {
					if unseen := c.unseenLocks(cp.key.entity, since, d.end()); missing > unseen {
						out = append(out, fmt.Sprintf("%s: delivery count rose from %d to %d by %v with %d receives unanswered in between",
							name, prev, d.DeliveryCount, at(d.end()), unseen))
					}
				}
				if hi > 0 && d.DeliveryCount > hi {
					out = append(out, fmt.Sprintf("%s: delivered with count %d, beyond MaxDeliveryCount %d", name, d.DeliveryCount, hi))
				}
				prev, since, last = d.DeliveryCount, c.lockedAt(cp, d), d
			}
			for _, d := range drained {
				if d.DeliveryCount < prev {
					out = append(out, fmt.Sprintf("%s: drained with delivery count %d after a delivery with %d", name, d.DeliveryCount, prev))
				}
				switch {
				case d.dlq && d.Reason == ReasonMaxDeliveryCount && lo > 0 && d.DeliveryCount < lo:
					out = append(out, fmt.Sprintf("%s: dead-lettered for MaxDeliveryCount after %d deliveries, MaxDeliveryCount %d", name, d.DeliveryCount, lo))
				case !d.dlq && hi > 0 && d.DeliveryCount >= hi && d.State != "deferred" && last != nil &&
					c.lockLatestEnd(cp, last)+int64(c.opt.ExpiryGrace) < d.start():
					out = append(out, fmt.Sprintf("%s: still in the queue at the end after %d deliveries, MaxDeliveryCount %d", name, d.DeliveryCount, hi))
				}
			}
		}
	}
	return out
}

// lockedAt is the earliest d's message may have been locked or taken:
// the start of its receive (or of the unknown receive whose messages that
// receive handed out), but no earlier than its locked-until less the
// longest lock duration, give or take the clock uncertainty.
func (c *run) lockedAt(cp *copyOf, d *delivery) int64 {
	if !d.locked() || d.LockedUntil == 0 {
		return d.start()
	}
	var longest int64
	for _, s := range c.settingsOf(cp.key.entity) {
		longest = max(longest, s.LockDuration)
	}
	if longest == 0 {
		return d.start()
	}
	return max(d.start(), d.LockedUntil-longest-int64(c.opt.ClockUncertainty))
}

// unseenLocks counts the receives of entity with an unknown outcome that
// may have acted within (from, to) (see actsUntil): each may have locked
// a message nobody saw, raising its delivery count.
func (c *run) unseenLocks(entity string, from, to int64) int {
	n := 0
	for _, r := range c.unknownReceives[entity] {
		if c.actsUntil(r) > from && r.Start < to {
			n++
		}
	}
	return n
}

// actsUntil is the latest op, whose outcome its client does not know,
// may have acted at the broker: a request held up in the network may
// reach its node after the client gave up on it (Options.LateEffect).
func (c *run) actsUntil(op *history.Op) int64 {
	return op.End + int64(c.opt.LateEffect)
}
