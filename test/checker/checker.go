// Package checker judges a failover run from its history: the operations the
// clients recorded (see package history) and a final drain of every entity
// and dead-letter sub-queue. It knows nothing of how the run was made; each
// rule is a property a user of the broker relies on.
//
// Operations are ordered only when one's acknowledgement arrived before the
// other started (End < Start); overlapping operations may have taken effect
// in either order, and no rule assumes one.
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/raftbus/raftbus/test/history"
)

// Report is the verdict on one history.
type Report struct {
	Operations int
	Faults     int
	// Acknowledged counts messages whose send or schedule the broker
	// acknowledged.
	Acknowledged int
	// Lost: acknowledged messages neither received nor drained (nor
	// cancelled).
	Lost []string
	// DuplicatedAfterComplete: deliveries that began after a Complete of
	// the same message was acknowledged.
	DuplicatedAfterComplete []string
	// SequenceViolations: a sequence number handed out twice, a message
	// delivered with another number than it was acknowledged with, or
	// numbers not increasing in acknowledged order within a partition.
	SequenceViolations []string
	// OrderViolations: messages of one session processed out of sequence
	// order.
	OrderViolations []string
	// ScheduleViolations: a scheduled message delivered before its time, or
	// a message whose cancel was acknowledged before its time delivered.
	ScheduleViolations []string
	// MaxUnavailable is the longest time without a successful operation;
	// Windows breaks it down per fault.
	MaxUnavailable time.Duration
	Windows        []FaultWindow
}

// FaultWindow is the longest stretch without a successful operation that
// overlaps the time from one fault to the next.
type FaultWindow struct {
	Fault       string
	At          time.Duration
	Unavailable time.Duration
}

// OK reports whether no rule was broken.
func (r *Report) OK() bool {
	return len(r.Lost) == 0 && len(r.DuplicatedAfterComplete) == 0 &&
		len(r.SequenceViolations) == 0 && len(r.OrderViolations) == 0 &&
		len(r.ScheduleViolations) == 0
}

// String is the report as printed at the end of a run.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations %d, faults %d, acknowledged %d, lost %d, duplicated-after-complete %d, sequence violations %d, order violations %d, schedule violations %d, max unavailability %v\n",
		r.Operations, r.Faults, r.Acknowledged, len(r.Lost), len(r.DuplicatedAfterComplete),
		len(r.SequenceViolations), len(r.OrderViolations), len(r.ScheduleViolations),
		r.MaxUnavailable.Round(time.Millisecond))
	for _, w := range r.Windows {
		fmt.Fprintf(&b, "  fault %-24s at %8v: unavailable %v\n", w.Fault, w.At.Round(time.Millisecond), w.Unavailable.Round(time.Millisecond))
	}
	list := func(name string, items []string) {
		const show = 20
		for i, s := range items {
			if i == show {
				fmt.Fprintf(&b, "  %s: ... and %d more\n", name, len(items)-show)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", name, s)
		}
	}
	list("lost", r.Lost)
	list("duplicated after complete", r.DuplicatedAfterComplete)
	list("sequence", r.SequenceViolations)
	list("order", r.OrderViolations)
	list("schedule", r.ScheduleViolations)
	return b.String()
}

// Options tune the checker.
type Options struct {
	// ScheduleTolerance is how early a scheduled message may be seen, for
	// the difference between the broker's clock and the recorder's.
	ScheduleTolerance time.Duration
}

// Check applies every rule to ops.
func Check(ops []history.Op, opt Options) *Report {
	c := newRun(ops)
	r := &Report{Operations: c.operations, Faults: len(c.faults)}
	r.Acknowledged = len(c.acked)
	r.Lost = c.lost()
	r.DuplicatedAfterComplete = c.resurrections()
	r.SequenceViolations = c.sequences()
	r.OrderViolations = c.sessionOrder()
	r.ScheduleViolations = c.schedules(int64(opt.ScheduleTolerance))
	r.MaxUnavailable, r.Windows = c.availability()
	return r
}

// delivery is one message handed out by a receive or found by a drain.
type delivery struct {
	history.Delivery
	entity string
	start  int64
	end    int64
	drain  bool
}

// run indexes a history by message.
type run struct {
	operations int
	faults     []history.Op
	// acked: messages whose send or schedule was acknowledged.
	acked map[string]history.Op
	// numbered: every acknowledged Send and Schedule with a number.
	numbered   []history.Op
	deliveries map[string][]delivery
	completes  map[string][]history.Op
	settles    []history.Op // Complete and DeadLetter, acknowledged
	cancels    map[string][]history.Op
	successes  []int64 // End of every acknowledged client operation
	end        int64   // the last End of any client operation
}

func newRun(ops []history.Op) *run {
	c := &run{
		acked:      make(map[string]history.Op),
		deliveries: make(map[string][]delivery),
		completes:  make(map[string][]history.Op),
		cancels:    make(map[string][]history.Op),
	}
	for _, op := range ops {
		switch op.Kind {
		case history.Fault:
			c.faults = append(c.faults, op)
			continue
		case history.Drain:
			for _, d := range op.Messages {
				c.deliveries[d.MessageID] = append(c.deliveries[d.MessageID], delivery{d, op.Entity, op.Start, op.End, true})
			}
			continue
		}
		c.operations++
		c.end = max(c.end, op.End)
		if op.Outcome == history.OK {
			c.successes = append(c.successes, op.End)
		}
		switch op.Kind {
		case history.Send, history.Schedule:
			if op.Outcome != history.OK {
				continue
			}
			if prev, ok := c.acked[op.MessageID]; !ok || prev.Duplicate {
				c.acked[op.MessageID] = op
			}
			if op.Seq != 0 {
				c.numbered = append(c.numbered, op)
			}
		case history.Receive:
			if op.Outcome != history.OK {
				continue
			}
			for _, d := range op.Messages {
				c.deliveries[d.MessageID] = append(c.deliveries[d.MessageID], delivery{d, op.Entity, op.Start, op.End, false})
			}
		case history.Complete, history.DeadLetter:
			if op.Outcome != history.OK {
				continue
			}
			c.settles = append(c.settles, op)
			if op.Kind == history.Complete {
				c.completes[op.MessageID] = append(c.completes[op.MessageID], op)
			}
		case history.Cancel:
			c.cancels[op.MessageID] = append(c.cancels[op.MessageID], op)
		}
	}
	sort.Slice(c.successes, func(i, j int) bool { return c.successes[i] < c.successes[j] })
	return c
}

// lost lists acknowledged messages never seen again. A scheduled message
// with a cancel that succeeded, or may have, is excused.
func (c *run) lost() []string {
	var out []string
	for id, op := range c.acked {
		if len(c.deliveries[id]) > 0 {
			continue
		}
		if op.Kind == history.Schedule && c.cancelAttempted(id) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s to %s, acknowledged with seq %d at %v)", id, op.Kind, op.Entity, op.Seq, at(op.End)))
	}
	sort.Strings(out)
	return out
}

func (c *run) cancelAttempted(id string) bool {
	for _, op := range c.cancels[id] {
		if op.Outcome != history.Fail {
			return true
		}
	}
	return false
}

// resurrections lists deliveries that started after the message's Complete
// was acknowledged.
func (c *run) resurrections() []string {
	var out []string
	for id, completes := range c.completes {
		first := completes[0].End
		for _, op := range completes[1:] {
			first = min(first, op.End)
		}
		for _, d := range c.deliveries[id] {
			if d.start > first {
				how := "received"
				if d.drain {
					how = "drained"
				}
				out = append(out, fmt.Sprintf("%s %s at %v after its complete was acknowledged at %v", id, how, at(d.start), at(first)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// sequences checks that numbers are unique per partition, that a message
// keeps the number it was acknowledged with, and that acknowledged numbers
// increase in acknowledged order.
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
	ids := make([]string, 0, len(c.deliveries))
	for id := range c.deliveries {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, d := range c.deliveries[id] {
			// A dead-lettered message keeps its number, so drains of the
			// dead-letter sub-queue are held to the same rules.
			claim(key{d.entity, d.Partition, d.Seq}, id)
			if sent, ok := c.acked[id]; ok && sent.Kind == history.Send && sent.Seq != 0 && d.Seq != sent.Seq {
				out = append(out, fmt.Sprintf("%s acknowledged with seq %d, delivered with seq %d", id, sent.Seq, d.Seq))
			}
		}
	}
	type stream struct {
		entity    string
		partition uint32
	}
	out = append(out, increasing(c.numbered, func(op history.Op) any { return stream{op.Entity, op.Partition} },
		func(a, b history.Op) string {
			return fmt.Sprintf("%s partition %d: %s got seq %d after %s got seq %d earlier", a.Entity, a.Partition, b.MessageID, b.Seq, a.MessageID, a.Seq)
		})...)
	return out
}

// sessionOrder checks that within a session, messages were settled
// (completed or dead-lettered by the client) in sequence order.
func (c *run) sessionOrder() []string {
	var inSession []history.Op
	for _, op := range c.settles {
		if op.SessionID != "" {
			inSession = append(inSession, op)
		}
	}
	type session struct{ entity, id string }
	return increasing(inSession, func(op history.Op) any { return session{op.Entity, op.SessionID} },
		func(a, b history.Op) string {
			return fmt.Sprintf("%s session %s: %s (seq %d) processed after %s (seq %d)", a.Entity, a.SessionID, b.MessageID, b.Seq, a.MessageID, a.Seq)
		})
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

// schedules checks that scheduled messages appear no earlier than their
// time, and that a cancel acknowledged before that time holds.
func (c *run) schedules(tolerance int64) []string {
	var out []string
	for id, op := range c.acked {
		if op.Kind != history.Schedule {
			continue
		}
		for _, d := range c.deliveries[id] {
			// A drain peeks: it sees scheduled messages before their time.
			if !d.drain && d.end < op.ScheduledFor-tolerance {
				out = append(out, fmt.Sprintf("%s due at %v delivered by %v", id, at(op.ScheduledFor), at(d.end)))
			}
		}
		for _, cancel := range c.cancels[id] {
			if cancel.Outcome == history.OK && cancel.End < op.ScheduledFor && len(c.deliveries[id]) > 0 {
				out = append(out, fmt.Sprintf("%s cancelled at %v before its time %v but delivered", id, at(cancel.End), at(op.ScheduledFor)))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// availability measures the gaps between successful operations (and from
// the last one to the end of the run): the longest overall, and per fault
// the longest gap that ended after it and before the next fault started,
// so that an outage counts against the fault that caused it.
func (c *run) availability() (time.Duration, []FaultWindow) {
	points := c.successes
	if n := len(points); n > 0 && c.end > points[n-1] {
		points = append(points[:n:n], c.end)
	}
	faults := append([]history.Op(nil), c.faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	windows := make([]FaultWindow, len(faults))
	for i, f := range faults {
		windows[i] = FaultWindow{Fault: f.Fault, At: time.Duration(f.Start)}
	}
	var longest time.Duration
	for i := 1; i < len(points); i++ {
		gap := time.Duration(points[i] - points[i-1])
		longest = max(longest, gap)
		// The last fault that started before the gap ended.
		k := sort.Search(len(faults), func(j int) bool { return faults[j].Start >= points[i] }) - 1
		if k >= 0 {
			windows[k].Unavailable = max(windows[k].Unavailable, gap)
		}
	}
	return longest, windows
}

func at(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }
