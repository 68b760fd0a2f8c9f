package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/raftbus/raftbus/test/history"
)

type stream struct {
	entity    string
	partition uint32
}

// sequences checks that numbers are unique per partition, that a message
// keeps the number it was acknowledged with (a duplicate is answered with
// its first copy's), and that acknowledged numbers increase in
// acknowledged order.
func (c *run) sequences() []string {
	var out []string
	type key struct {
		entity    string
		partition uint32
		seq       int64
	}
	owner := make(map[key]string)
	reported := make(map[key]bool)
	claim := func(k key, id string) {
		if prev, ok := owner[k]; ok && prev != id {
			if !reported[k] {
				out = append(out, fmt.Sprintf("%s partition %d seq %d handed to both %s and %s", k.entity, k.partition, k.seq, prev, id))
				reported[k] = true
			}
			return
		}
		owner[k] = id
	}
	for _, op := range c.numbered {
		claim(key{op.Entity, op.Partition, op.Seq}, op.MessageID)
	}
	for _, op := range c.answeredAsFirst {
		claim(key{op.Entity, op.Partition, op.Seq}, op.MessageID)
	}
	for _, cp := range c.sortedCopies() {
		m := c.messages[cp.key.id]
		for _, d := range cp.deliveries {
			// A dead-lettered message is drained under its first number,
			// so drains of the dead-letter sub-queue are held to the same
			// rules.
			claim(key{d.entity, d.Partition, d.Seq}, cp.key.id)
			// Only a message sent once can have one number; more copies
			// are judged as duplicates.
			if m == nil || m.entity != cp.key.entity || m.mayHaveHappened() != 1 {
				continue
			}
			if sent := m.acked(); sent != nil && sent.Kind == history.Send && sent.Seq != 0 && d.Seq != sent.Seq {
				out = append(out, fmt.Sprintf("%s acknowledged with seq %d, delivered with seq %d", cp.key.id, sent.Seq, d.Seq))
			}
		}
	}
	out = append(out, increasing(c.numbered, func(op history.Op) any { return stream{op.Entity, op.Partition} },
		func(a, b history.Op) string {
			return fmt.Sprintf("%s partition %d: %s got seq %d after %s got seq %d earlier", a.Entity, a.Partition, b.MessageID, b.Seq, a.MessageID, a.Seq)
		})...)
	return out
}

// increasing reports every op whose Seq is not above the Seq of an op of the
// same stream acknowledged before it started. Ops are grouped by stream.
func increasing(ops []history.Op, stream func(history.Op) any, describe func(earlier, later history.Op) string) []string {
	byEnd := append([]history.Op(nil), ops...)
	sort.SliceStable(byEnd, func(i, j int) bool { return byEnd[i].End < byEnd[j].End })
	byStart := append([]history.Op(nil), ops...)
	sort.SliceStable(byStart, func(i, j int) bool { return byStart[i].Start < byStart[j].Start })
	highest := make(map[any]history.Op)
	var out []string
	next := 0
	for _, op := range byStart {
		for next < len(byEnd) && byEnd[next].End < op.Start {
			done := byEnd[next]
			s := stream(done)
			if h, ok := highest[s]; !ok || done.Seq > h.Seq {
				highest[s] = done
			}
			next++
		}
		if h, ok := highest[stream(op)]; ok && op.Seq <= h.Seq {
			out = append(out, describe(h, op))
		}
	}
	return out
}

// enqueueTimes checks that within a partition, enqueue times never go
// backwards in sequence order (and that a message keeps its enqueue time).
func (c *run) enqueueTimes() []string {
	type stamp struct {
		seq, ms int64
		id      string
	}
	byStream := make(map[stream]map[int64]stamp)
	var out []string
	note := func(s stream, seq, ms int64, id string) {
		if ms == 0 {
			return
		}
		m := byStream[s]
		if m == nil {
			m = make(map[int64]stamp)
			byStream[s] = m
		}
		if prev, ok := m[seq]; ok && prev.ms != ms {
			out = append(out, fmt.Sprintf("%s partition %d seq %d (%s) enqueued at %d ms and at %d ms", s.entity, s.partition, seq, id, prev.ms, ms))
		}
		m[seq] = stamp{seq, ms, id}
	}
	for _, op := range append(c.numbered, c.answeredAsFirst...) {
		note(stream{op.Entity, op.Partition}, op.Seq, op.Enqueued, op.MessageID)
	}
	for _, cp := range c.sortedCopies() {
		for _, d := range cp.deliveries {
			// The dead-letter sub-queue stamps its own time; a scheduled
			// message is stamped when it activates, under a new number.
			if !d.dlq && d.State != "scheduled" {
				note(stream{d.entity, d.Partition}, d.Seq, d.Enqueued, cp.key.id)
			}
		}
	}
	streams := make([]stream, 0, len(byStream))
	for s := range byStream {
		streams = append(streams, s)
	}
	sort.Slice(streams, func(i, j int) bool {
		if streams[i].entity != streams[j].entity {
			return streams[i].entity < streams[j].entity
		}
		return streams[i].partition < streams[j].partition
	})
	for _, s := range streams {
		stamps := make([]stamp, 0, len(byStream[s]))
		for _, st := range byStream[s] {
			stamps = append(stamps, st)
		}
		sort.Slice(stamps, func(i, j int) bool { return stamps[i].seq < stamps[j].seq })
		for i := 1; i < len(stamps); i++ {
			if a, b := stamps[i-1], stamps[i]; b.ms < a.ms {
				out = append(out, fmt.Sprintf("%s partition %d: seq %d (%s) enqueued at %d ms, before seq %d (%s) at %d ms",
					s.entity, s.partition, b.seq, b.id, b.ms, a.seq, a.id, a.ms))
			}
		}
	}
	return out
}

// lastEnd is when the latest send of m that may have happened ended: every
// copy was enqueued by then.
func (m *message) lastEnd() int64 {
	var last int64
	for _, a := range m.attempts {
		if a.Outcome != history.Fail {
			last = max(last, a.End)
		}
	}
	return last
}

// expiries checks time to live: no delivery after a message certainly
// expired, no expired message left in its queue, and none dead-lettered
// as expired before it could have expired or by an entity that drops
// expired messages. (Expired messages missing from the dead-letter
// sub-queue of an entity that keeps them are lost; see lost.)
func (c *run) expiries() []string {
	var out []string
	u := int64(c.opt.ClockUncertainty)
	for _, cp := range c.sortedCopies() {
		m := c.messages[cp.key.id]
		if m == nil || m.scheduled() || m.mayHaveHappened() == 0 {
			continue
		}
		lo, hi := c.ttl(cp.key, m)
		if lo == 0 {
			continue
		}
		name := fmt.Sprintf("%s in %s", cp.key.id, cp.key.entity)
		latest := m.lastEnd() + hi + u // expired by then, certainly
		earliest := m.firstStart() + lo - u
		_, never := c.deadLettersExpired(cp.key.entity)
		for _, d := range cp.deliveries {
			switch {
			case !d.drain && hi > 0 && d.start() > latest:
				out = append(out, fmt.Sprintf("%s seq %d: received at %v, though it expired by %v", name, d.Seq, at(d.start()), at(latest)))
			case d.drain && !d.dlq && hi > 0 && d.State != "deferred" && d.start() > max(latest, c.quietFrom)+int64(c.opt.ExpiryGrace) && c.unlockedBy(cp, d.Seq, d.start()):
				// The broker removes an expired message on its leader's
				// timer: it is owed the grace with the cluster whole, not
				// while the partition has no leader (a rolling restart
				// ending just before the drain).
				out = append(out, fmt.Sprintf("%s seq %d: still in the queue at %v, though it expired by %v", name, d.Seq, at(d.start()), at(latest)))
			case d.dlq && d.Reason == ReasonTTLExpired && d.end() < earliest:
				out = append(out, fmt.Sprintf("%s seq %d: dead-lettered as expired by %v, though it could not expire before %v", name, d.Seq, at(d.end()), at(earliest)))
			case d.dlq && d.Reason == ReasonTTLExpired && never:
				out = append(out, fmt.Sprintf("%s seq %d: dead-lettered as expired by an entity that drops expired messages", name, d.Seq))
			}
		}
	}
	return out
}

// unlockedBy reports whether every lock on the copy stored under seq had
// certainly ended, with time to spare, by t.
func (c *run) unlockedBy(cp *copyOf, seq, t int64) bool {
	for _, d := range cp.deliveries {
		if d.Seq == seq && d.locked() && c.lockLatestEnd(cp, d)+int64(c.opt.ExpiryGrace) >= t {
			return false
		}
	}
	return true
}

// schedules checks that a scheduled message's schedule is acknowledged
// with the number that cancels it, that it appears no earlier than its
// time, and that a cancel acknowledged before that time holds.
func (c *run) schedules(tolerance int64) []string {
	var out []string
	for _, m := range c.messages {
		op := m.acked()
		if op == nil || op.Kind != history.Schedule {
			continue
		}
		if op.Seq == 0 {
			out = append(out, fmt.Sprintf("%s scheduled at %v without a sequence number to cancel it by", m.id, at(op.End)))
		}
		cp := c.copies[copyKey{m.entity, m.id}]
		if cp == nil {
			continue
		}
		for _, d := range cp.deliveries {
			// A drain peeks: it sees scheduled messages before their time.
			if !d.drain && d.end() < op.ScheduledFor-tolerance {
				out = append(out, fmt.Sprintf("%s due at %v delivered by %v", m.id, at(op.ScheduledFor), at(d.end())))
			}
		}
		for _, cancel := range c.cancels[m.id] {
			if cancel.Outcome == history.OK && cancel.End < op.ScheduledFor && len(cp.deliveries) > 0 {
				out = append(out, fmt.Sprintf("%s cancelled at %v before its time %v but delivered", m.id, at(cancel.End), at(op.ScheduledFor)))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// availability measures the gaps between successful operations (and from
// the last one to the end of the run): the longest overall, and per fault
// the longest stretch of a gap during which it was the last fault
// injected. A gap is split where faults start, so that an outage counts
// against the fault that caused it, and the recovery from a fault that
// struck during another one's outage counts against the later one alone.
func (c *run) availability() (time.Duration, []FaultWindow) {
	points := c.successes
	if n := len(points); n > 0 && c.end > points[n-1] {
		points = append(points[:n:n], c.end)
	}
	faults := append([]*history.Op(nil), c.faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	windows := make([]FaultWindow, len(faults))
	for i, f := range faults {
		windows[i] = FaultWindow{Fault: f.Fault, Kind: faultKind(f.Fault), At: time.Duration(f.Start)}
	}
	var longest time.Duration
	for i := 1; i < len(points); i++ {
		from, to := points[i-1], points[i]
		longest = max(longest, time.Duration(to-from))
		// The faults in effect during the gap: the last one started by its
		// beginning, and each one started within it.
		k := sort.Search(len(faults), func(j int) bool { return faults[j].Start > from }) - 1
		for ; k < len(faults) && (k < 0 || faults[k].Start < to); k++ {
			if k < 0 {
				continue
			}
			start := max(from, faults[k].Start)
			end := to
			if k+1 < len(faults) && faults[k+1].Start < to {
				end = faults[k+1].Start
			}
			windows[k].Unavailable = max(windows[k].Unavailable, time.Duration(end-start))
		}
	}
	return longest, windows
}
