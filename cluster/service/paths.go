package service

import (
	"context"
	"strings"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// An entity path names a queue, a topic, or a subscription
// ("<topic>/subscriptions/<name>", whose messages the topic's partitions
// hold). A path no entity could have is INVALID_ARGUMENT; a well-formed
// one of an entity that does not exist is NOT_FOUND.

// resolved is an entity path as the partitions know it.
type resolved struct {
	// entity is the queue or topic whose partitions hold path.
	entity *clusterv1.Entity
	path   string
	// sub is set when path is a subscription.
	sub *clusterv1.Subscription
}

func (r resolved) requiresSession() bool {
	if r.sub != nil {
		return r.sub.GetProperties().GetRequiresSession()
	}
	return r.entity.GetQueue().GetRequiresSession()
}

// resolve finds what a receive-side path names: a queue, a topic, or a
// subscription ("<topic>/subscriptions/<name>", held by the topic's
// partitions).
func resolve(ctx context.Context, n Node, path string) (resolved, error) {
	if err := checkPath(path); err != nil {
		return resolved{}, err
	}
	if topic, name, ok := meta.SplitSubscriptionPath(path); ok {
		e, sub, err := n.Subscription(ctx, topic, name)
		if err != nil {
			return resolved{}, err
		}
		return resolved{entity: e, path: path, sub: sub}, nil
	}
	e, err := n.Entity(ctx, path)
	if err != nil {
		return resolved{}, err
	}
	return resolved{entity: e, path: path}, nil
}

// checkPath refuses an entity path that no entity could have (INVALID_
// ARGUMENT, as errors.proto says), so that only a well-formed path of an
// entity that does not exist gets NOT_FOUND.
func checkPath(path string) error {
	if topic, name, ok := meta.SplitSubscriptionPath(path); ok {
		if err := checkEntityName("topic", topic); err != nil {
			return err
		}
		return checkChildName("subscription", name)
	}
	return checkEntityName("entity", path)
}

// checkEntityName enforces the naming rules of queues and topics: 1 to 260
// characters of letters, digits, '.', '-', '_' and '/', the slash neither
// leading, trailing nor doubled, and no "subscriptions" segment (that names
// a subscription).
func checkEntityName(kind, name string) error {
	if name == "" || len(name) > 260 {
		return apierror.Invalid("%s name must be 1 to 260 characters, not %d", kind, len(name))
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' || r == '/'
		if !ok {
			return apierror.Invalid("%s name %q: character %q at %d is not allowed (letters, digits, '.', '-', '_' and '/')", kind, name, r, i)
		}
	}
	if strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") {
		return apierror.Invalid("%s name %q: '/' may not lead, trail or be doubled", kind, name)
	}
	for _, seg := range strings.Split(name, "/") {
		if strings.EqualFold(seg, "subscriptions") {
			return apierror.Invalid("%s name %q: the segment %q is reserved for subscriptions", kind, name, seg)
		}
	}
	return nil
}

// checkChildName enforces the naming rule of subscriptions and rules: 1 to
// 50 characters of letters, digits, '.', '-', '_' ('$' leads the names the
// broker gives, as in "$Default").
func checkChildName(kind, name string) error {
	if name == "" || len(name) > 50 {
		return apierror.Invalid("%s name must be 1 to 50 characters, not %d", kind, len(name))
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' || r == '$' && i == 0
		if !ok {
			return apierror.Invalid("%s name %q: character %q at %d is not allowed (letters, digits, '.', '-' and '_')", kind, name, r, i)
		}
	}
	return nil
}
