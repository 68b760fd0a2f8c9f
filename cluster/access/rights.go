package access

import (
	"strings"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// requirement is what a call needs: one of rights on every entity of
// entities ("" is the namespace: a policy of the namespace).
type requirement struct {
	rights   []raftbusv1.AccessRight
	entities []string
}

var (
	manage = []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE}
	send   = []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_SEND}
	listen = []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN}
	// anyRight is what routing needs: a sender and a receiver both ask
	// where an entity's partitions are.
	anyRight = []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_SEND, raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN}
)

func on(rights []raftbusv1.AccessRight, entities ...string) requirement {
	return requirement{rights: rights, entities: entities}
}

// namespaceManage is what a call needs that is not listed below: the
// safe default.
var namespaceManage = on(manage, "")

// requirementOf tells what the public call req needs. Each request type
// is listed: a new one needs Manage on the namespace until it is added.
func requirementOf(req any) requirement {
	switch r := req.(type) {
	// Sending.
	case *raftbusv1.SendRequest:
		return on(send, r.GetEntityPath())
	case *raftbusv1.SendEachRequest:
		return on(send, r.GetEntityPath())
	case *raftbusv1.ScheduleRequest:
		return on(send, r.GetEntityPath())
	case *raftbusv1.CancelScheduledRequest:
		return on(send, r.GetEntityPath())

	// Receiving and settling.
	case *raftbusv1.ReceiveRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.ReceiveStreamRequest:
		// The open request; each grant is checked as a ReceiveRequest.
		return on(listen, r.GetOpen().GetEntityPath())
	case *raftbusv1.ReceiveDeferredRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.PeekRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.CompleteRequest:
		return on(listen, r.GetLock().GetEntityPath())
	case *raftbusv1.AbandonRequest:
		return on(listen, r.GetLock().GetEntityPath())
	case *raftbusv1.DeadLetterRequest:
		return on(listen, r.GetLock().GetEntityPath())
	case *raftbusv1.DeferRequest:
		return on(listen, r.GetLock().GetEntityPath())
	case *raftbusv1.RenewLockRequest:
		return on(listen, r.GetLock().GetEntityPath())
	case *raftbusv1.SettleRequest:
		req := on(listen)
		for _, s := range r.GetSettlements() {
			req.entities = append(req.entities, s.GetLock().GetEntityPath())
		}
		return req
	case *raftbusv1.AcceptSessionRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.RenewSessionLockRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.GetSessionStateRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.SetSessionStateRequest:
		return on(listen, r.GetEntityPath())
	case *raftbusv1.CloseSessionRequest:
		return on(listen, r.GetEntityPath())

	// Managing one entity: Manage on it (or the namespace).
	case *raftbusv1.GetQueueRequest:
		return on(manage, r.GetName())
	case *raftbusv1.UpdateQueueRequest:
		return on(manage, r.GetQueue().GetName())
	case *raftbusv1.DeleteQueueRequest:
		return on(manage, r.GetName())
	case *raftbusv1.GetQueueRuntimePropertiesRequest:
		return on(manage, r.GetName())
	case *raftbusv1.GetTopicRequest:
		return on(manage, r.GetName())
	case *raftbusv1.UpdateTopicRequest:
		return on(manage, r.GetTopic().GetName())
	case *raftbusv1.DeleteTopicRequest:
		return on(manage, r.GetName())
	case *raftbusv1.GetTopicRuntimePropertiesRequest:
		return on(manage, r.GetName())
	case *raftbusv1.CreateSubscriptionRequest:
		return on(manage, r.GetSubscription().GetTopicName())
	case *raftbusv1.GetSubscriptionRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.UpdateSubscriptionRequest:
		return on(manage, r.GetSubscription().GetTopicName())
	case *raftbusv1.DeleteSubscriptionRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.ListSubscriptionsRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.GetSubscriptionRuntimePropertiesRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.CreateRuleRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.GetRuleRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.UpdateRuleRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.DeleteRuleRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.ListRulesRequest:
		return on(manage, r.GetTopicName())
	case *raftbusv1.GetRoutingTableRequest:
		return on(anyRight, r.GetEntityPath())

	// Policies: Manage at their scope.
	case *raftbusv1.CreateAccessPolicyRequest:
		return on(manage, r.GetPolicy().GetEntityPath())
	case *raftbusv1.ListAccessPoliciesRequest:
		return on(manage, r.GetEntityPath())
	case *raftbusv1.DeleteAccessPolicyRequest:
		return on(manage, r.GetEntityPath())
	case *raftbusv1.RegenerateAccessPolicyKeyRequest:
		return on(manage, r.GetEntityPath())
	}
	// Creating and listing entities, cluster information, node removal,
	// and anything not listed.
	return namespaceManage
}

// scopeOf is the queue or topic an entity path belongs to: policies are
// on queues and topics, and a topic's cover its subscriptions.
func scopeOf(entityPath string) string {
	top, _, _ := strings.Cut(entityPath, "/")
	return top
}

// within reports whether entityPath is the resource path res or under
// it ("" is the namespace, over everything). Case does not count: the
// Azure SDKs sign a lower-cased resource URI, and Service Bus entity
// paths are case-insensitive.
func within(entityPath, res string) bool {
	if res == "" || strings.EqualFold(entityPath, res) {
		return true
	}
	return len(entityPath) > len(res) && entityPath[len(res)] == '/' && strings.EqualFold(entityPath[:len(res)], res)
}

// grants reports whether a policy's rights include one of want. Manage
// includes Send and Listen.
func grants(have, want []raftbusv1.AccessRight) bool {
	for _, h := range have {
		if h == raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE {
			return true
		}
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}
