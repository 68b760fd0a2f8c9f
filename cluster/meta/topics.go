package meta

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// SubscriptionPath is the entity path of a subscription.
func SubscriptionPath(topic, subscription string) string {
	return topic + "/subscriptions/" + subscription
}

// SplitSubscriptionPath splits "<topic>/subscriptions/<name>"; ok is false
// for any other path.
func SplitSubscriptionPath(path string) (topic, subscription string, ok bool) {
	i := strings.LastIndex(path, "/subscriptions/")
	if i <= 0 {
		return "", "", false
	}
	topic, subscription = path[:i], path[i+len("/subscriptions/"):]
	return topic, subscription, subscription != "" && !strings.Contains(subscription, "/")
}

// FindSubscription returns the subscription of topic entity e, or nil.
func FindSubscription(e *clusterv1.Entity, name string) *clusterv1.Subscription {
	if i, ok := subscriptionIndex(e, name); ok {
		return e.Subscriptions[i]
	}
	return nil
}

func subscriptionIndex(e *clusterv1.Entity, name string) (int, bool) {
	return slices.BinarySearchFunc(e.GetSubscriptions(), name, func(s *clusterv1.Subscription, n string) int {
		return strings.Compare(s.GetProperties().GetSubscriptionName(), n)
	})
}

func ruleIndex(s *clusterv1.Subscription, name string) (int, bool) {
	return slices.BinarySearchFunc(s.GetRules(), name, func(r *raftbusv1.RuleProperties, n string) int {
		return strings.Compare(r.GetName(), n)
	})
}

func putTopic(s *clusterv1.MetaSnapshot, put *clusterv1.PutTopic, now *timestamppb.Timestamp, index uint64) *clusterv1.MetaResult {
	t := proto.Clone(put.GetTopic()).(*raftbusv1.TopicProperties)
	i, found := entityIndex(s, t.GetName())
	if put.GetCreate() {
		if found {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "entity %q already exists", t.GetName())
		}
		if !slices.ContainsFunc(s.Nodes, Active) {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, "the cluster has no active members yet")
		}
		t.CreatedAt, t.UpdatedAt = now, now
		e := &clusterv1.Entity{
			Name:        t.GetName(),
			Kind:        clusterv1.EntityKind_ENTITY_KIND_TOPIC,
			Topic:       t,
			Incarnation: index,
			Generation:  1,
			Partitions:  Place(s.Nodes, t.GetName(), t.GetPartitionCount()),
		}
		s.Entities = slices.Insert(s.Entities, i, e)
		return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity)}
	}
	if !found || s.Entities[i].GetKind() != clusterv1.EntityKind_ENTITY_KIND_TOPIC {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "topic %q does not exist", t.GetName())
	}
	e := s.Entities[i]
	old := e.GetTopic()
	switch {
	case old.GetRequiresDuplicateDetection() != t.GetRequiresDuplicateDetection():
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "requires_duplicate_detection of topic %q is fixed at creation", t.GetName())
	case old.GetPartitionCount() != t.GetPartitionCount():
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "partition_count of topic %q is fixed at creation", t.GetName())
	}
	t.CreatedAt, t.UpdatedAt = old.GetCreatedAt(), now
	e.Topic = t
	e.Generation++
	return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity)}
}

// topicOf finds the topic a subscription command names.
func topicOf(s *clusterv1.MetaSnapshot, name string) (*clusterv1.Entity, *clusterv1.MetaResult) {
	e := FindEntity(s, name)
	if e == nil || e.GetKind() != clusterv1.EntityKind_ENTITY_KIND_TOPIC {
		return nil, failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "topic %q does not exist", name)
	}
	return e, nil
}

func putSubscription(s *clusterv1.MetaSnapshot, put *clusterv1.PutSubscription, now *timestamppb.Timestamp) *clusterv1.MetaResult {
	props := proto.Clone(put.GetSubscription()).(*raftbusv1.SubscriptionProperties)
	e, fail := topicOf(s, props.GetTopicName())
	if fail != nil {
		return fail
	}
	i, found := subscriptionIndex(e, props.GetSubscriptionName())
	if put.GetCheckForwarding() && put.GetCreate() != found {
		g := &forwardGraph{s: s, path: SubscriptionPath(e.GetName(), props.GetSubscriptionName()), topic: e.GetName(),
			forwardTo: props.GetForwardTo(), forwardDLQ: props.GetForwardDeadLetteredMessagesTo()}
		if fail := checkForwarding(g); fail != nil {
			return fail
		}
	}
	if put.GetCreate() {
		if found {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "subscription %q of topic %q already exists", props.GetSubscriptionName(), e.GetName())
		}
		props.CreatedAt, props.UpdatedAt = now, now
		sub := &clusterv1.Subscription{Properties: props}
		for _, r := range put.GetRules() {
			r = proto.Clone(r).(*raftbusv1.RuleProperties)
			r.CreatedAt = now
			j, dup := ruleIndex(sub, r.GetName())
			if dup {
				return failure(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "rule %q named twice", r.GetName())
			}
			sub.Rules = slices.Insert(sub.Rules, j, r)
		}
		e.Subscriptions = slices.Insert(e.Subscriptions, i, sub)
		e.Generation++
		return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity), Subscription: proto.Clone(sub).(*clusterv1.Subscription)}
	}
	if !found {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "subscription %q of topic %q does not exist", props.GetSubscriptionName(), e.GetName())
	}
	sub := e.Subscriptions[i]
	if sub.GetProperties().GetRequiresSession() != props.GetRequiresSession() {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "requires_session of subscription %q is fixed at creation", props.GetSubscriptionName())
	}
	props.CreatedAt, props.UpdatedAt = sub.GetProperties().GetCreatedAt(), now
	sub.Properties = props
	e.Generation++
	return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity), Subscription: proto.Clone(sub).(*clusterv1.Subscription)}
}

func deleteSubscription(s *clusterv1.MetaSnapshot, del *clusterv1.DeleteSubscription) *clusterv1.MetaResult {
	e, fail := topicOf(s, del.GetTopicName())
	if fail != nil {
		return fail
	}
	i, found := subscriptionIndex(e, del.GetSubscriptionName())
	if !found {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "subscription %q of topic %q does not exist", del.GetSubscriptionName(), e.GetName())
	}
	if fail := checkGuard(e, del.GetGuard()); fail != nil {
		return fail
	}
	e.Subscriptions = slices.Delete(e.Subscriptions, i, i+1)
	e.Generation++
	return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity)}
}

func putRule(s *clusterv1.MetaSnapshot, put *clusterv1.PutRule, now *timestamppb.Timestamp) *clusterv1.MetaResult {
	e, fail := topicOf(s, put.GetTopicName())
	if fail != nil {
		return fail
	}
	sub := FindSubscription(e, put.GetSubscriptionName())
	if sub == nil {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "subscription %q of topic %q does not exist", put.GetSubscriptionName(), e.GetName())
	}
	r := proto.Clone(put.GetRule()).(*raftbusv1.RuleProperties)
	j, found := ruleIndex(sub, r.GetName())
	switch {
	case put.GetCreate() && found:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "rule %q of subscription %q already exists", r.GetName(), put.GetSubscriptionName())
	case !put.GetCreate() && !found:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "rule %q of subscription %q does not exist", r.GetName(), put.GetSubscriptionName())
	case found:
		r.CreatedAt = sub.Rules[j].GetCreatedAt()
		sub.Rules[j] = r
	default:
		r.CreatedAt = now
		sub.Rules = slices.Insert(sub.Rules, j, r)
	}
	e.Generation++
	return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity), Rule: proto.Clone(r).(*raftbusv1.RuleProperties)}
}

func deleteRule(s *clusterv1.MetaSnapshot, del *clusterv1.DeleteRule) *clusterv1.MetaResult {
	e, fail := topicOf(s, del.GetTopicName())
	if fail != nil {
		return fail
	}
	sub := FindSubscription(e, del.GetSubscriptionName())
	if sub == nil {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "subscription %q of topic %q does not exist", del.GetSubscriptionName(), e.GetName())
	}
	j, found := ruleIndex(sub, del.GetRuleName())
	if !found {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "rule %q of subscription %q does not exist", del.GetRuleName(), del.GetSubscriptionName())
	}
	sub.Rules = slices.Delete(sub.Rules, j, j+1)
	e.Generation++
	return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity)}
}
