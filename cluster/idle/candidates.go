package idle

import (
	"time"

	"github.com/raftbus/raftbus/engine"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Candidate is an entity with auto_delete_on_idle set.
type Candidate struct {
	// Path is the entity's path; Topic and Subscription are set for a
	// subscription.
	Path, Topic, Subscription string
	// After is its auto_delete_on_idle.
	After time.Duration
	// Updated is when it was last changed (created, for one never
	// updated): it was in use then, whatever the nodes remember.
	Updated time.Time
	// Guard names the entity (for a subscription, its topic) as it was
	// when the candidate was taken, for a deletion that must not touch
	// another.
	Guard *clusterv1.EntityGuard
}

// Candidates lists the entities of s with auto_delete_on_idle set.
func Candidates(s *clusterv1.MetaSnapshot) []Candidate {
	var out []Candidate
	for _, e := range s.GetEntities() {
		guard := &clusterv1.EntityGuard{Incarnation: e.GetIncarnation(), Generation: e.GetGeneration()}
		switch e.GetKind() {
		case clusterv1.EntityKind_ENTITY_KIND_QUEUE:
			q := e.GetQueue()
			out = appendCandidate(out, Candidate{Path: e.GetName(), Guard: guard}, q.GetAutoDeleteOnIdle(), q.GetCreatedAt(), q.GetUpdatedAt())
		case clusterv1.EntityKind_ENTITY_KIND_TOPIC:
			t := e.GetTopic()
			out = appendCandidate(out, Candidate{Path: e.GetName(), Guard: guard}, t.GetAutoDeleteOnIdle(), t.GetCreatedAt(), t.GetUpdatedAt())
			for _, sub := range e.GetSubscriptions() {
				p := sub.GetProperties()
				c := Candidate{Path: e.GetName() + "/subscriptions/" + p.GetSubscriptionName(), Topic: e.GetName(), Subscription: p.GetSubscriptionName(), Guard: guard}
				out = appendCandidate(out, c, p.GetAutoDeleteOnIdle(), p.GetCreatedAt(), p.GetUpdatedAt())
			}
		}
	}
	return out
}

func appendCandidate(out []Candidate, c Candidate, after *durationpb.Duration, created, updated *timestamppb.Timestamp) []Candidate {
	if d := after.AsDuration(); d <= 0 || d >= engine.NeverAutoDelete {
		return out // unset (written before the setting existed) or never
	}
	c.After = after.AsDuration()
	for _, t := range []*timestamppb.Timestamp{created, updated} {
		if t != nil && t.IsValid() && t.AsTime().After(c.Updated) {
			c.Updated = t.AsTime()
		}
	}
	return append(out, c)
}

// Due reports whether c is due for deletion: idle is the least any node
// reported for its path, now the wall-clock time of the check.
func Due(c Candidate, idle time.Duration, now time.Time) bool {
	return idle >= c.After && now.Sub(c.Updated) >= c.After
}
