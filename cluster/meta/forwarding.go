package meta

import (
	"strings"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// MaxForwardingHops is the longest chain of automatic forwarding a message
// can take, as in Service Bus: each forward_to or
// forward_dead_lettered_messages_to is a hop; a topic handing a message to
// its subscriptions is not.
const MaxForwardingHops = 4

// Forwarding is checked when a queue or a subscription is created or
// updated, against the state the change would make: each target must be an
// existing queue or topic other than the entity itself, no chain of
// forwarding (through topics to their subscriptions, dead-letter
// forwarding included) may come back to where it started, and none may be
// longer than MaxForwardingHops. Only chains through the changed entity
// are looked at: every new chain goes through it. Deleting a target is not
// refused (as in Service Bus); what its sources then do is the
// forwarder's business (see cluster/forwarder.go).

// forwardGraph is the forwarding of the entities of s, with the entity at
// path given the targets forwardTo and forwardDLQ, and added to the
// subscriptions of topic when that is set (a subscription being created).
type forwardGraph struct {
	s                     *clusterv1.MetaSnapshot
	path                  string
	forwardTo, forwardDLQ string
	topic                 string
}

// hop is one edge of the graph: to the entity at path to, costing cost
// hops (0 from a topic to its subscription).
type hop struct {
	to   string
	cost int
}

// forwardingOf returns the forwarding targets of the entity at path, and
// whether it is a queue or subscription that exists.
func (g *forwardGraph) forwardingOf(path string) (fwd, dlq string) {
	if path == g.path {
		return g.forwardTo, g.forwardDLQ
	}
	if e := FindEntity(g.s, path); e != nil {
		q := e.GetQueue()
		return q.GetForwardTo(), q.GetForwardDeadLetteredMessagesTo()
	}
	if t, name, ok := SplitSubscriptionPath(path); ok {
		if sub := FindSubscription(FindEntity(g.s, t), name); sub != nil {
			p := sub.GetProperties()
			return p.GetForwardTo(), p.GetForwardDeadLetteredMessagesTo()
		}
	}
	return "", ""
}

// next is where a message at path can go from there.
func (g *forwardGraph) next(path string) []hop {
	var out []hop
	if e := FindEntity(g.s, path); e != nil && e.GetKind() == clusterv1.EntityKind_ENTITY_KIND_TOPIC {
		for _, sub := range e.GetSubscriptions() {
			out = append(out, hop{SubscriptionPath(path, sub.GetProperties().GetSubscriptionName()), 0})
		}
		if g.topic == path && FindSubscription(e, g.path[strings.LastIndex(g.path, "/")+1:]) == nil {
			out = append(out, hop{g.path, 0})
		}
		return out
	}
	fwd, dlq := g.forwardingOf(path)
	for _, t := range [2]string{fwd, dlq} {
		// The queue being created is a target too.
		if t != "" && (isForwardTarget(g.s, t) || t == g.path && g.topic == "") {
			out = append(out, hop{t, 1})
		}
	}
	return out
}

// isForwardTarget reports whether name is an existing queue or topic.
func isForwardTarget(s *clusterv1.MetaSnapshot, name string) bool {
	e := FindEntity(s, name)
	return e != nil && (e.GetKind() == clusterv1.EntityKind_ENTITY_KIND_QUEUE || e.GetKind() == clusterv1.EntityKind_ENTITY_KIND_TOPIC)
}

// checkForwarding checks the forwarding of the changed entity g.path;
// it returns a failure, or nil.
func checkForwarding(g *forwardGraph) *clusterv1.MetaResult {
	invalid := raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT
	for _, t := range [...]struct{ setting, target string }{
		{"forward_to", g.forwardTo}, {"forward_dead_lettered_messages_to", g.forwardDLQ},
	} {
		switch {
		case t.target == "":
		case t.target == g.path:
			return failure(invalid, "%s of %q names the entity itself: an entity cannot forward to itself", t.setting, g.path)
		case !isForwardTarget(g.s, t.target):
			return failure(invalid, "%s of %q names %q, which is not an existing queue or topic", t.setting, g.path, t.target)
		}
	}
	if g.forwardTo == "" && g.forwardDLQ == "" {
		return nil
	}
	if loop := g.loopThrough(); loop != nil {
		return failure(invalid, "forwarding of %q would make a loop: %s", g.path, strings.Join(loop, " -> "))
	}
	up, down := g.longestInto(), g.longestFrom()
	if up+down > MaxForwardingHops {
		return failure(invalid, "forwarding of %q would make a chain of %d hops; at most %d are allowed", g.path, up+down, MaxForwardingHops)
	}
	return nil
}

// loopThrough returns a chain of forwarding from g.path back to it, or nil.
func (g *forwardGraph) loopThrough() []string {
	seen := map[string]bool{}
	var walk func(path string, chain []string) []string
	walk = func(path string, chain []string) []string {
		for _, h := range g.next(path) {
			if h.to == g.path {
				return append(chain, h.to)
			}
			if !seen[h.to] {
				seen[h.to] = true
				if loop := walk(h.to, append(chain, h.to)); loop != nil {
					return loop
				}
			}
		}
		return nil
	}
	return walk(g.path, []string{g.path})
}

// longest is the most hops a walk from path along next can take. A loop
// (only in state written before the check existed) counts as ending the
// walk.
func longest(path string, next func(string) []hop) int {
	memo, active := map[string]int{}, map[string]bool{}
	var walk func(path string) int
	walk = func(path string) int {
		if d, ok := memo[path]; ok {
			return d
		}
		if active[path] {
			return 0
		}
		active[path] = true
		best := 0
		for _, h := range next(path) {
			best = max(best, h.cost+walk(h.to))
		}
		active[path] = false
		memo[path] = best
		return best
	}
	return walk(path)
}

// longestFrom is the most hops a message at g.path can still take.
func (g *forwardGraph) longestFrom() int { return longest(g.path, g.next) }

// longestInto is the most hops a message can have taken when it reaches
// g.path: the longest walk along the edges reversed.
func (g *forwardGraph) longestInto() int {
	into := map[string][]hop{} // by target: the edges into it, reversed
	add := func(from string) {
		for _, h := range g.next(from) {
			into[h.to] = append(into[h.to], hop{from, h.cost})
		}
	}
	for _, e := range g.s.GetEntities() {
		add(e.GetName())
		for _, sub := range e.GetSubscriptions() {
			add(SubscriptionPath(e.GetName(), sub.GetProperties().GetSubscriptionName()))
		}
	}
	if FindEntity(g.s, g.path) == nil {
		add(g.path) // a new entity, or a subscription not yet listed
	}
	return longest(g.path, func(path string) []hop { return into[path] })
}
