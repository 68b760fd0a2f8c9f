// Package checker judges a failover run from its history: the operations the
// clients recorded (see package history), the faults injected, a final
// drain of every entity and dead-letter sub-queue, and the digests of the
// replicas once the cluster settled. It knows nothing of how the run was
// made; each rule is a property a user of the broker relies on, judged by
// the semantics of the entity the message went to (its settings are in the
// history).
//
// Operations are ordered only when one's acknowledgement arrived before the
// other started (End < Start); overlapping operations may have taken effect
// in either order, and no rule assumes one. An operation whose outcome is
// unknown may or may not have happened, and no rule assumes either; it may
// also have happened after its client gave up, up to Options.LateEffect
// later (the network held the request). Times the broker reports (lock
// and expiry times) are trusted only to within Options.ClockUncertainty.
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
	// Faults counts the faults injected (not their healings), by kind too.
	Faults       int
	FaultsByKind map[string]int
	// Acknowledged counts messages whose send or schedule the broker
	// acknowledged.
	Acknowledged int

	// Lost: a copy of a message the broker acknowledged, or delivered, that
	// is gone without having been consumed (completed, or received in
	// ReceiveAndDelete mode), expired or deleted with its entity.
	Lost []string
	// Phantoms: messages delivered although every send of them failed.
	Phantoms []string
	// Duplicated: messages stored more than once where the entity's
	// semantics forbid it (duplicate detection on and a MessageId, or more
	// copies than sends that may have happened).
	Duplicated []string
	// DuplicatedAllowed: messages stored more than once, as at-least-once
	// delivery allows after a send with an unknown outcome was repeated on
	// an entity without duplicate detection. Not a violation; counted.
	DuplicatedAllowed []string
	// Resurrected: deliveries that began after the same stored copy was
	// consumed (its Complete acknowledged, or a ReceiveAndDelete returned).
	Resurrected []string
	// FilterViolations: copies in a subscription whose rules reject them.
	FilterViolations []string
	// MessageLockViolations: one message locked by two receivers at once.
	MessageLockViolations []string
	// SessionLockViolations: one session held by two receivers at once.
	SessionLockViolations []string
	// DeliveryCountViolations: delivery counts that do not rise by one per
	// delivery, messages delivered beyond MaxDeliveryCount or dead-lettered
	// before it, or left in the queue after exceeding it.
	DeliveryCountViolations []string
	// SequenceViolations: a sequence number handed out twice, a message
	// delivered with another number than it was acknowledged with, or
	// numbers not increasing in acknowledged order within a partition.
	SequenceViolations []string
	// EnqueueTimeViolations: enqueue times going backwards in sequence
	// order within a partition.
	EnqueueTimeViolations []string
	// TTLViolations: messages delivered after they expired, expired ones
	// still in the queue or not where the entity sends them, or
	// dead-lettered as expired before their time.
	TTLViolations []string
	// OrderViolations: messages of one session processed out of sequence
	// order.
	OrderViolations []string
	// ScheduleViolations: a scheduled message delivered before its time, or
	// a message whose cancel was acknowledged before its time delivered.
	ScheduleViolations []string
	// SessionStateViolations: session state going backwards, or a value
	// nobody wrote.
	SessionStateViolations []string
	// ReplicaViolations: replicas of one partition that applied the same
	// log but hold different states, or never caught up.
	ReplicaViolations []string
	// EntityViolations: entities that vanished: known to exist and not
	// deleted by anyone, yet found gone by a delete or the final drain.
	EntityViolations []string
	// FaultViolations: faults the cluster did not take as it must, e.g. a
	// node that did not stop on SIGTERM.
	FaultViolations []string

	// MaxUnavailable is the longest time without a successful operation;
	// Windows breaks it down per fault.
	MaxUnavailable time.Duration
	Windows        []FaultWindow
}

// FaultWindow is the longest stretch without a successful operation while
// one fault was the last injected.
type FaultWindow struct {
	Fault       string
	Kind        string
	At          time.Duration
	Unavailable time.Duration
}

// rules lists the report's violations by name, in the order printed.
func (r *Report) rules() []struct {
	name  string
	items []string
} {
	return []struct {
		name  string
		items []string
	}{
		{"lost", r.Lost},
		{"phantom", r.Phantoms},
		{"duplicated (not allowed)", r.Duplicated},
		{"delivered after consumed", r.Resurrected},
		{"filter", r.FilterViolations},
		{"message lock", r.MessageLockViolations},
		{"session lock", r.SessionLockViolations},
		{"delivery count", r.DeliveryCountViolations},
		{"sequence", r.SequenceViolations},
		{"enqueue time", r.EnqueueTimeViolations},
		{"ttl", r.TTLViolations},
		{"order", r.OrderViolations},
		{"schedule", r.ScheduleViolations},
		{"session state", r.SessionStateViolations},
		{"replicas", r.ReplicaViolations},
		{"entity", r.EntityViolations},
		{"fault", r.FaultViolations},
	}
}

// OK reports whether no rule was broken.
func (r *Report) OK() bool {
	for _, rule := range r.rules() {
		if len(rule.items) > 0 {
			return false
		}
	}
	return true
}

// String is the report as printed at the end of a run: the figures, the
// worst unavailability per kind of fault, and up to 20 examples of each
// violation.
func (r *Report) String() string {
	var b strings.Builder
	allowed := "allowed"
	if len(r.Duplicated) > 0 {
		allowed = fmt.Sprintf("%d not allowed", len(r.Duplicated))
	}
	fmt.Fprintf(&b, "operations %d, faults %d, acknowledged %d, lost %d, duplicated %d (%s; %d allowed by at-least-once after an unknown outcome), max unavailability %v\n",
		r.Operations, r.Faults, r.Acknowledged, len(r.Lost), len(r.Duplicated)+len(r.DuplicatedAllowed), allowed,
		len(r.DuplicatedAllowed), r.MaxUnavailable.Round(time.Millisecond))
	var counts []string
	for _, rule := range r.rules() {
		counts = append(counts, fmt.Sprintf("%s %d", rule.name, len(rule.items)))
	}
	fmt.Fprintf(&b, "violations: %s\n", strings.Join(counts, ", "))
	for _, k := range r.kindSummary() {
		fmt.Fprintf(&b, "  faults %-20s %4d, max unavailability %v\n", k.kind, k.count, k.worst.Round(time.Millisecond))
	}
	worst := append([]FaultWindow(nil), r.Windows...)
	sort.SliceStable(worst, func(i, j int) bool { return worst[i].Unavailable > worst[j].Unavailable })
	for _, w := range worst[:min(len(worst), 5)] {
		fmt.Fprintf(&b, "  worst: fault %-24s at %8v: unavailable %v\n", w.Fault, w.At.Round(time.Millisecond), w.Unavailable.Round(time.Millisecond))
	}
	for _, rule := range r.rules() {
		const show = 20
		for i, s := range rule.items {
			if i == show {
				fmt.Fprintf(&b, "  %s: ... and %d more\n", rule.name, len(rule.items)-show)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", rule.name, s)
		}
	}
	return b.String()
}

type kindSummary struct {
	kind  string
	count int
	worst time.Duration
}

func (r *Report) kindSummary() []kindSummary {
	byKind := make(map[string]*kindSummary)
	var out []kindSummary
	for _, w := range r.Windows {
		k := byKind[w.Kind]
		if k == nil {
			k = &kindSummary{kind: w.Kind}
			byKind[w.Kind] = k
		}
		k.count++
		k.worst = max(k.worst, w.Unavailable)
	}
	for _, k := range byKind {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].kind < out[j].kind })
	return out
}

// Options tune the checker.
type Options struct {
	// ScheduleTolerance is how early a scheduled message may be seen, for
	// the difference between the broker's clock and the recorder's.
	ScheduleTolerance time.Duration
	// ClockUncertainty is how far a time the broker reports (a lock's or a
	// message's end) may be from the recorder's clock: the bound the
	// broker keeps on its nodes' clock offsets, plus rounding.
	ClockUncertainty time.Duration
	// ExpiryGrace is how long after a message's time to live ended the
	// broker may still hold it in its queue (it removes expired messages
	// when its leader next applies time).
	ExpiryGrace time.Duration
	// LateEffect is how long after its client gave up a request may
	// still act (see run.actsUntil): a request the network held (a
	// partition, a paused node) reaches its node when the fault ends,
	// long after the client stopped waiting, and its cancellation,
	// which follows it, may come only once the node has acted on it.
	LateEffect time.Duration
}

// Check applies every rule to ops.
func Check(ops []history.Op, opt Options) *Report {
	c := newRun(ops, opt)
	r := &Report{Operations: c.operations, Faults: len(c.faults), FaultsByKind: make(map[string]int)}
	for _, f := range c.faults {
		r.FaultsByKind[faultKind(f.Fault)]++
	}
	r.Acknowledged = c.acknowledged()
	r.Lost = c.lost()
	r.Phantoms = c.phantoms()
	r.Duplicated, r.DuplicatedAllowed = c.duplicates()
	r.Resurrected = c.resurrections()
	r.FilterViolations = c.filters()
	r.MessageLockViolations = c.messageLocks()
	r.SessionLockViolations = c.sessionLocks()
	r.DeliveryCountViolations = c.deliveryCounts()
	r.SequenceViolations = c.sequences()
	r.EnqueueTimeViolations = c.enqueueTimes()
	r.TTLViolations = c.expiries()
	r.OrderViolations = c.sessionOrder()
	r.ScheduleViolations = c.schedules(int64(opt.ScheduleTolerance))
	r.SessionStateViolations = c.sessionStates()
	r.ReplicaViolations = c.replicas()
	r.EntityViolations = c.vanishedEntities()
	r.FaultViolations = c.faultFailures()
	r.MaxUnavailable, r.Windows = c.availability()
	return r
}

// faultKind is the first word of a fault's name ("kill n2" -> "kill").
func faultKind(name string) string {
	kind, _, _ := strings.Cut(name, " ")
	return kind
}

func at(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }
