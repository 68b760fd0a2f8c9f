// Package admin manages raftbus entities — queues, topics, subscriptions
// and rules — and reports their runtime counts and the cluster's state,
// like azservicebus/admin. Entity settings are the API's messages
// (raftbus.v1.QueueProperties and friends): unset fields take the server's
// defaults on create and keep their value on update.
package admin

import (
	"context"

	"github.com/raftbus/raftbus/client"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Entity settings and reports, as the API defines them.
type (
	QueueProperties        = raftbusv1.QueueProperties
	TopicProperties        = raftbusv1.TopicProperties
	SubscriptionProperties = raftbusv1.SubscriptionProperties
	RuleProperties         = raftbusv1.RuleProperties
	RuntimeProperties      = raftbusv1.RuntimeProperties
	ClusterInfo            = raftbusv1.GetClusterInfoResponse
	EntityRoute            = raftbusv1.EntityRoute
)

// Client manages entities. Failures are *client.Error.
type Client struct {
	api   raftbusv1.AdminServiceClient
	owned *client.Client
}

// New connects to the cluster at addrs; Close closes the connections.
func New(addrs []string, options *client.ClientOptions) (*Client, error) {
	c, err := client.New(addrs, options)
	if err != nil {
		return nil, err
	}
	a := NewFromClient(c)
	a.owned = c
	return a, nil
}

// NewFromConnectionString connects with a connection string, as
// client.NewClientFromConnectionString does; its key needs Manage.
func NewFromConnectionString(connectionString string, options *client.ClientOptions) (*Client, error) {
	c, err := client.NewClientFromConnectionString(connectionString, options)
	if err != nil {
		return nil, err
	}
	a := NewFromClient(c)
	a.owned = c
	return a, nil
}

// NewFromClient shares the connections of c (Close leaves them open).
func NewFromClient(c *client.Client) *Client {
	return &Client{api: raftbusv1.NewAdminServiceClient(c.AdminConn())}
}

// Close closes the connections New opened.
func (a *Client) Close() error {
	if a.owned != nil {
		return a.owned.Close()
	}
	return nil
}

// CreateQueue creates the queue name with props (nil: all defaults) and
// returns it with every setting filled in.
func (a *Client) CreateQueue(ctx context.Context, name string, props *QueueProperties) (*QueueProperties, error) {
	q := clone(props, &QueueProperties{})
	q.Name = name
	resp, err := a.api.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: q})
	return resp.GetQueue(), err
}

// GetQueue returns a queue's settings.
func (a *Client) GetQueue(ctx context.Context, name string) (*QueueProperties, error) {
	resp, err := a.api.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: name})
	return resp.GetQueue(), err
}

// UpdateQueue changes the settings set in props; unset ones keep their
// value. (It reads the queue and writes it back with the changes: a
// concurrent update in between is overwritten.)
func (a *Client) UpdateQueue(ctx context.Context, name string, props *QueueProperties) (*QueueProperties, error) {
	cur, err := a.GetQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	q := overlay(cur, clone(props, &QueueProperties{}))
	q.Name = name
	resp, err := a.api.UpdateQueue(ctx, &raftbusv1.UpdateQueueRequest{Queue: q})
	return resp.GetQueue(), err
}

// DeleteQueue deletes a queue and its messages.
func (a *Client) DeleteQueue(ctx context.Context, name string) error {
	_, err := a.api.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: name})
	return err
}

// ListQueues returns every queue, by name.
func (a *Client) ListQueues(ctx context.Context) ([]*QueueProperties, error) {
	return listAll(func(token string) ([]*QueueProperties, string, error) {
		resp, err := a.api.ListQueues(ctx, &raftbusv1.ListQueuesRequest{PageToken: token})
		return resp.GetQueues(), resp.GetNextPageToken(), err
	})
}

// GetQueueRuntimeProperties returns a queue's live counts.
func (a *Client) GetQueueRuntimeProperties(ctx context.Context, name string) (*RuntimeProperties, error) {
	resp, err := a.api.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: name})
	return resp.GetProperties(), err
}

// CreateTopic creates a topic.
func (a *Client) CreateTopic(ctx context.Context, name string, props *TopicProperties) (*TopicProperties, error) {
	t := clone(props, &TopicProperties{})
	t.Name = name
	resp, err := a.api.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: t})
	return resp.GetTopic(), err
}

// GetTopic returns a topic's settings.
func (a *Client) GetTopic(ctx context.Context, name string) (*TopicProperties, error) {
	resp, err := a.api.GetTopic(ctx, &raftbusv1.GetTopicRequest{Name: name})
	return resp.GetTopic(), err
}

// UpdateTopic changes the settings set in props.
func (a *Client) UpdateTopic(ctx context.Context, name string, props *TopicProperties) (*TopicProperties, error) {
	cur, err := a.GetTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	t := overlay(cur, clone(props, &TopicProperties{}))
	t.Name = name
	resp, err := a.api.UpdateTopic(ctx, &raftbusv1.UpdateTopicRequest{Topic: t})
	return resp.GetTopic(), err
}

// DeleteTopic deletes a topic, its subscriptions and their messages.
func (a *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := a.api.DeleteTopic(ctx, &raftbusv1.DeleteTopicRequest{Name: name})
	return err
}

// ListTopics returns every topic, by name.
func (a *Client) ListTopics(ctx context.Context) ([]*TopicProperties, error) {
	return listAll(func(token string) ([]*TopicProperties, string, error) {
		resp, err := a.api.ListTopics(ctx, &raftbusv1.ListTopicsRequest{PageToken: token})
		return resp.GetTopics(), resp.GetNextPageToken(), err
	})
}

// GetTopicRuntimeProperties returns a topic's live counts.
func (a *Client) GetTopicRuntimeProperties(ctx context.Context, name string) (*RuntimeProperties, error) {
	resp, err := a.api.GetTopicRuntimeProperties(ctx, &raftbusv1.GetTopicRuntimePropertiesRequest{Name: name})
	return resp.GetProperties(), err
}

// CreateSubscription creates a subscription of topic with defaultRule as
// its first rule (nil: "$Default", matching every message).
func (a *Client) CreateSubscription(ctx context.Context, topic, name string, props *SubscriptionProperties, defaultRule *RuleProperties) (*SubscriptionProperties, error) {
	s := clone(props, &SubscriptionProperties{})
	s.TopicName, s.SubscriptionName = topic, name
	resp, err := a.api.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{Subscription: s, DefaultRule: defaultRule})
	return resp.GetSubscription(), err
}

// GetSubscription returns a subscription's settings.
func (a *Client) GetSubscription(ctx context.Context, topic, name string) (*SubscriptionProperties, error) {
	resp, err := a.api.GetSubscription(ctx, &raftbusv1.GetSubscriptionRequest{TopicName: topic, SubscriptionName: name})
	return resp.GetSubscription(), err
}

// UpdateSubscription changes the settings set in props.
func (a *Client) UpdateSubscription(ctx context.Context, topic, name string, props *SubscriptionProperties) (*SubscriptionProperties, error) {
	cur, err := a.GetSubscription(ctx, topic, name)
	if err != nil {
		return nil, err
	}
	s := overlay(cur, clone(props, &SubscriptionProperties{}))
	s.TopicName, s.SubscriptionName = topic, name
	resp, err := a.api.UpdateSubscription(ctx, &raftbusv1.UpdateSubscriptionRequest{Subscription: s})
	return resp.GetSubscription(), err
}

// DeleteSubscription deletes a subscription.
func (a *Client) DeleteSubscription(ctx context.Context, topic, name string) error {
	_, err := a.api.DeleteSubscription(ctx, &raftbusv1.DeleteSubscriptionRequest{TopicName: topic, SubscriptionName: name})
	return err
}

// ListSubscriptions returns a topic's subscriptions, by name.
func (a *Client) ListSubscriptions(ctx context.Context, topic string) ([]*SubscriptionProperties, error) {
	return listAll(func(token string) ([]*SubscriptionProperties, string, error) {
		resp, err := a.api.ListSubscriptions(ctx, &raftbusv1.ListSubscriptionsRequest{TopicName: topic, PageToken: token})
		return resp.GetSubscriptions(), resp.GetNextPageToken(), err
	})
}

// GetSubscriptionRuntimeProperties returns a subscription's live counts.
func (a *Client) GetSubscriptionRuntimeProperties(ctx context.Context, topic, name string) (*RuntimeProperties, error) {
	resp, err := a.api.GetSubscriptionRuntimeProperties(ctx, &raftbusv1.GetSubscriptionRuntimePropertiesRequest{TopicName: topic, SubscriptionName: name})
	return resp.GetProperties(), err
}

// CreateRule adds a rule to a subscription.
func (a *Client) CreateRule(ctx context.Context, topic, subscription string, rule *RuleProperties) (*RuleProperties, error) {
	resp, err := a.api.CreateRule(ctx, &raftbusv1.CreateRuleRequest{TopicName: topic, SubscriptionName: subscription, Rule: rule})
	return resp.GetRule(), err
}

// GetRule returns one rule.
func (a *Client) GetRule(ctx context.Context, topic, subscription, name string) (*RuleProperties, error) {
	resp, err := a.api.GetRule(ctx, &raftbusv1.GetRuleRequest{TopicName: topic, SubscriptionName: subscription, RuleName: name})
	return resp.GetRule(), err
}

// UpdateRule replaces a rule's filter and action.
func (a *Client) UpdateRule(ctx context.Context, topic, subscription string, rule *RuleProperties) (*RuleProperties, error) {
	resp, err := a.api.UpdateRule(ctx, &raftbusv1.UpdateRuleRequest{TopicName: topic, SubscriptionName: subscription, Rule: rule})
	return resp.GetRule(), err
}

// DeleteRule removes a rule.
func (a *Client) DeleteRule(ctx context.Context, topic, subscription, name string) error {
	_, err := a.api.DeleteRule(ctx, &raftbusv1.DeleteRuleRequest{TopicName: topic, SubscriptionName: subscription, RuleName: name})
	return err
}

// ListRules returns a subscription's rules, by name.
func (a *Client) ListRules(ctx context.Context, topic, subscription string) ([]*RuleProperties, error) {
	return listAll(func(token string) ([]*RuleProperties, string, error) {
		resp, err := a.api.ListRules(ctx, &raftbusv1.ListRulesRequest{TopicName: topic, SubscriptionName: subscription, PageToken: token})
		return resp.GetRules(), resp.GetNextPageToken(), err
	})
}

// GetClusterInfo describes the nodes and every partition's replicas.
func (a *Client) GetClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	return a.api.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
}

// GetRoutingTable tells which node leads each partition of path (empty:
// of every entity).
func (a *Client) GetRoutingTable(ctx context.Context, path string) ([]*EntityRoute, error) {
	resp, err := a.api.GetRoutingTable(ctx, &raftbusv1.GetRoutingTableRequest{EntityPath: path})
	return resp.GetEntities(), err
}

// DrainNode moves every partition replica off a node onto the others,
// leadership first, keeping three replicas of each partition; the node
// stays a member without replicas. GetClusterInfo shows the progress
// (NodeInfo.Replicas and ReplicasMoving).
func (a *Client) DrainNode(ctx context.Context, nodeID string) error {
	_, err := a.api.DrainNode(ctx, &raftbusv1.DrainNodeRequest{NodeId: nodeID})
	return err
}

// UndrainNode makes a draining node active again: it gets its share of
// replicas back as the cluster rebalances.
func (a *Client) UndrainNode(ctx context.Context, nodeID string) error {
	_, err := a.api.UndrainNode(ctx, &raftbusv1.UndrainNodeRequest{NodeId: nodeID})
	return err
}

// RemoveNode takes a node that is gone for good out of the cluster: its
// replicas are re-created on the others from their healthy copies, then
// it leaves the metadata group. Refused for a node that is up with
// replicas (drain it first) and when a partition could not reach a quorum
// without it.
func (a *Client) RemoveNode(ctx context.Context, nodeID string) error {
	_, err := a.api.RemoveNode(ctx, &raftbusv1.RemoveNodeRequest{NodeId: nodeID})
	return err
}

// listAll follows page tokens to the end.
func listAll[T any](page func(token string) ([]T, string, error)) ([]T, error) {
	var all []T
	token := ""
	for {
		items, next, err := page(token)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		token = next
	}
}
