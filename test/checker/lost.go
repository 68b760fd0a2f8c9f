package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/raftbus/raftbus/test/history"
)

// expected lists the copies the broker must keep of message m once a send
// of it was acknowledged: one in the queue it went to (or the queue that
// one forwards to), or one in each subscription of the topic whose rules
// accept it, as far as that is known (the subscription existed before the
// message could have been sent, and its rules did not change).
func (c *run) expected(m *message) []copyKey {
	if m.acked() == nil {
		return nil
	}
	e := c.entities[m.entity]
	if to := c.forwardTarget(m.entity); to != "" {
		return []copyKey{{to, m.id}}
	}
	if e == nil || len(e.subs) == 0 {
		return []copyKey{{m.entity, m.id}}
	}
	props := m.attempts[0].Props
	var out []copyKey
	for _, path := range e.subs {
		sub := c.entities[path]
		if sub.rulesChanged || !sub.createKnown || sub.created >= m.firstStart() {
			continue
		}
		if f := sub.settings[0].Filter; f != nil && f.Matches(props) {
			out = append(out, copyKey{path, m.id})
		}
	}
	return out
}

// storedSeqs lists the sequence numbers copy cp is known to have been
// stored under: those its sends were acknowledged with (when sent to its
// entity directly) and those it was delivered or drained with (a
// dead-lettered message is drained under its first number).
func (c *run) storedSeqs(cp *copyOf, m *message) []int64 {
	seen := make(map[int64]bool)
	if m != nil && m.entity == cp.key.entity {
		for _, a := range m.attempts {
			if a.Kind == history.Send && a.Outcome == history.OK && a.Seq != 0 {
				seen[a.Seq] = true
			}
		}
	}
	for _, d := range cp.deliveries {
		if !activatedMeanwhile(cp, d) {
			seen[d.Seq] = true
		}
	}
	out := make([]int64, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// activatedMeanwhile reports whether d, a drain's sighting of a scheduled
// message under its schedule number, is the same copy as a sighting of it
// enqueued: in the same partition under a later number (the broker
// numbers a scheduled message again when it comes due). A drain pages
// through a partition by sequence number while the broker works on, so a
// message that comes due during the drain is seen both ways.
func activatedMeanwhile(cp *copyOf, d *delivery) bool {
	if !d.drain || d.State != "scheduled" {
		return false
	}
	for _, o := range cp.deliveries {
		if o.State != "scheduled" && o.Seq > d.Seq && o.Seq>>48 == d.Seq>>48 {
			return true
		}
	}
	return false
}

// lost lists copies that are gone without a reason: acknowledged and
// never seen, or seen and later missing. A copy stored under a number is
// accounted for when the final drain found it, when a Complete of it may
// have happened, or when a ReceiveAndDelete returned it. Any copy of a
// message is excused when a ReceiveAndDelete of its entity with an unknown
// outcome may have taken it, when its time to live may have ended on an
// entity that drops expired messages, when its entity may have been
// deleted, or when a cancel of its schedule may have happened. Nothing
// else excuses it: an abandon, an expired lock, a defer or a dead-letter
// leave the message with the broker, and a delivery the client never saw
// consumed nothing.
func (c *run) lost() []string {
	candidates := make(map[copyKey]bool)
	for _, m := range c.messages {
		for _, k := range c.expected(m) {
			candidates[k] = true
		}
	}
	for k, cp := range c.copies {
		if len(cp.deliveries) > 0 {
			candidates[k] = true
		}
	}
	var out []string
	for k := range candidates {
		m := c.messages[k.id]
		if m == nil {
			continue // never sent by the workload: a phantom, if anything
		}
		if c.excused(k, m) != "" {
			continue
		}
		cp := c.copyOf(k)
		seqs := c.storedSeqs(cp, m)
		if len(seqs) == 0 {
			a := m.acked()
			out = append(out, fmt.Sprintf("%s in %s: %s acknowledged at %v, never delivered nor found", k.id, k.entity, a.Kind, at(a.End)))
			continue
		}
		for _, seq := range seqs {
			if !c.accountedFor(cp, seq) {
				out = append(out, fmt.Sprintf("%s in %s seq %d: %s", k.id, k.entity, seq, c.story(cp, m, seq)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// accountedFor reports whether the copy stored under seq was found at the
// end or may have been consumed.
func (c *run) accountedFor(cp *copyOf, seq int64) bool {
	for _, d := range cp.deliveries {
		if d.Seq == seq && (d.drain || d.rad) {
			return true
		}
	}
	for _, s := range cp.settles {
		if s.Kind == history.Complete && s.Seq == seq && s.Outcome != history.Fail {
			return true
		}
	}
	return false
}

// excused says why copy k of m may be gone, or "" when nothing excuses
// its absence.
func (c *run) excused(k copyKey, m *message) string {
	if c.removed(k.entity) {
		return "its entity was deleted"
	}
	if m.scheduled() && c.cancelAttempted(m.id) {
		return "its schedule was cancelled"
	}
	first := m.firstStart()
	for _, r := range c.unknownReceives[k.entity] {
		if r.Mode == history.ReceiveAndDelete && c.actsUntil(r) > first {
			return "a ReceiveAndDelete with an unknown outcome may have taken it"
		}
	}
	// An entity that dead-letters expired messages keeps them.
	if lo, _ := c.ttl(k, m); lo > 0 && first+lo-int64(c.opt.ClockUncertainty) < c.drainEnd {
		if always, _ := c.deadLettersExpired(k.entity); !always {
			return "it may have expired"
		}
	}
	return ""
}

func (c *run) cancelAttempted(id string) bool {
	for _, op := range c.cancels[id] {
		if op.Outcome != history.Fail {
			return true
		}
	}
	return false
}

// story tells what became of a lost copy, for the person reading the
// report.
func (c *run) story(cp *copyOf, m *message, seq int64) string {
	var parts []string
	if a := m.acked(); a != nil {
		parts = append(parts, fmt.Sprintf("%s acknowledged at %v", a.Kind, at(a.End)))
	} else {
		parts = append(parts, "sent with an unknown outcome")
	}
	for _, d := range cp.deliveries {
		if d.Seq == seq {
			parts = append(parts, fmt.Sprintf("delivered to proc %d at %v (count %d)", d.op.Process, at(d.end()), d.DeliveryCount))
		}
	}
	for _, s := range cp.settles {
		if s.Seq == seq && s.Kind != history.RenewLock {
			parts = append(parts, fmt.Sprintf("%s %s at %v", s.Kind, s.Outcome, at(s.End)))
		}
	}
	if len(parts) == 1 {
		return parts[0] + ", never delivered nor found"
	}
	return strings.Join(parts, ", ") + ", then missing"
}

// phantoms lists messages delivered although every attempt to send them
// failed: the broker said no and did it anyway.
func (c *run) phantoms() []string {
	var out []string
	for _, cp := range c.sortedCopies() {
		m := c.messages[cp.key.id]
		if m == nil || len(cp.deliveries) == 0 || m.mayHaveHappened() > 0 {
			continue
		}
		d := cp.deliveries[0]
		out = append(out, fmt.Sprintf("%s in %s seq %d: delivered at %v though all %d sends failed (last: %s)",
			cp.key.id, cp.key.entity, d.Seq, at(d.end()), len(m.attempts), m.attempts[len(m.attempts)-1].Error))
	}
	return out
}

// duplicates classifies messages stored more than once in one entity. With
// duplicate detection and a MessageId, a second copy within the window is
// a violation; without, at-least-once delivery allows one copy per send
// that may have happened (an unknown outcome repeated), and no more.
func (c *run) duplicates() (forbidden, allowed []string) {
	for _, cp := range c.sortedCopies() {
		m := c.messages[cp.key.id]
		if m == nil {
			continue
		}
		seqs := c.storedSeqs(cp, m)
		if len(seqs) < 2 {
			continue
		}
		sends := m.mayHaveHappened()
		desc := fmt.Sprintf("%s in %s stored %d times (seqs %v) from %d sends that may have happened", cp.key.id, cp.key.entity, len(seqs), seqs, sends)
		dedup, window := c.duplicateDetection(m.entity)
		anonymous := m.attempts[0].Anonymous
		switch {
		case dedup && !anonymous && !c.apart(cp, window):
			forbidden = append(forbidden, desc+", under duplicate detection")
		case len(seqs) > sends:
			forbidden = append(forbidden, desc)
		default:
			allowed = append(allowed, desc)
		}
	}
	return forbidden, allowed
}

// apart reports whether the copies of cp were enqueued further apart than
// the duplicate detection window, which then no longer applies.
func (c *run) apart(cp *copyOf, window int64) bool {
	if window <= 0 {
		return false
	}
	var lo, hi int64
	for _, d := range cp.deliveries {
		if d.Enqueued == 0 {
			continue
		}
		if lo == 0 || d.Enqueued < lo {
			lo = d.Enqueued
		}
		hi = max(hi, d.Enqueued)
	}
	return (hi-lo)*1e6 > window
}

// resurrections lists deliveries that began after the same stored copy
// was consumed: its Complete acknowledged, or a ReceiveAndDelete of it
// returned.
func (c *run) resurrections() []string {
	var out []string
	for _, cp := range c.sortedCopies() {
		consumed := make(map[int64]int64) // seq -> when its consumption was acknowledged
		note := func(seq, end int64) {
			if t, ok := consumed[seq]; !ok || end < t {
				consumed[seq] = end
			}
		}
		for _, s := range cp.settles {
			if s.Kind == history.Complete && s.Outcome == history.OK {
				note(s.Seq, s.End)
			}
		}
		for _, d := range cp.deliveries {
			if d.rad {
				note(d.Seq, d.end())
			}
		}
		for _, d := range cp.deliveries {
			if t, ok := consumed[d.Seq]; ok && d.start() > t {
				how := "received"
				if d.drain {
					how = "drained"
				}
				out = append(out, fmt.Sprintf("%s in %s seq %d %s at %v after it was consumed at %v", cp.key.id, cp.key.entity, d.Seq, how, at(d.start()), at(t)))
			}
		}
	}
	return out
}

// filters lists copies found in a subscription whose rules, as recorded,
// reject the message.
func (c *run) filters() []string {
	var out []string
	for _, cp := range c.sortedCopies() {
		sub := c.entities[cp.key.entity]
		m := c.messages[cp.key.id]
		if sub == nil || m == nil || len(cp.deliveries) == 0 || sub.rulesChanged || len(sub.settings) == 0 {
			continue
		}
		f := sub.settings[0].Filter
		if f == nil || sub.settings[0].Topic == "" || f.Matches(m.attempts[0].Props) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (properties %v) in %s, whose rules reject it", cp.key.id, m.attempts[0].Props, cp.key.entity))
	}
	return out
}
