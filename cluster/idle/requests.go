package idle

import (
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// RequestPaths are the entity paths a public request uses (see Paths):
// every messaging call, and every management call on a queue, topic,
// subscription or rule. Listings, cluster calls and access policies use
// no entity.
func RequestPaths(req any) []string {
	var out []string
	add := func(path string) { out = append(out, Paths(path)...) }
	sub := func(topic, name string) {
		if topic != "" && name != "" {
			add(topic + "/subscriptions/" + name)
		}
	}
	switch r := req.(type) {
	case interface{ GetEntityPath() string }: // messaging calls with a path
		add(r.GetEntityPath())
	case interface{ GetLock() *raftbusv1.MessageLock }: // one settlement
		add(r.GetLock().GetEntityPath())
	case *raftbusv1.SettleRequest:
		seen := map[string]bool{}
		for _, s := range r.GetSettlements() {
			if p := s.GetLock().GetEntityPath(); !seen[p] {
				seen[p] = true
				add(p)
			}
		}
	case *raftbusv1.CreateQueueRequest:
		add(r.GetQueue().GetName())
	case *raftbusv1.UpdateQueueRequest:
		add(r.GetQueue().GetName())
	case *raftbusv1.GetQueueRequest:
		add(r.GetName())
	case *raftbusv1.GetQueueRuntimePropertiesRequest:
		add(r.GetName())
	case *raftbusv1.CreateTopicRequest:
		add(r.GetTopic().GetName())
	case *raftbusv1.UpdateTopicRequest:
		add(r.GetTopic().GetName())
	case *raftbusv1.GetTopicRequest:
		add(r.GetName())
	case *raftbusv1.GetTopicRuntimePropertiesRequest:
		add(r.GetName())
	case *raftbusv1.CreateSubscriptionRequest:
		sub(r.GetSubscription().GetTopicName(), r.GetSubscription().GetSubscriptionName())
	case *raftbusv1.UpdateSubscriptionRequest:
		sub(r.GetSubscription().GetTopicName(), r.GetSubscription().GetSubscriptionName())
	case interface { // subscription and rule calls
		GetTopicName() string
		GetSubscriptionName() string
	}:
		sub(r.GetTopicName(), r.GetSubscriptionName())
	}
	return out
}
