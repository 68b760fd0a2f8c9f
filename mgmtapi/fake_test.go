package mgmtapi

import (
	"context"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// fakeAdmin is the admin service as the handler sees it, keeping
// entities in maps and recording every change asked of it, so that a
// test can say what a request became and that a refused one asked for
// nothing. A call it does not implement panics (the embedded nil
// interface).
type fakeAdmin struct {
	raftbusv1.AdminServiceClient

	mu     sync.Mutex
	queues map[string]*raftbusv1.QueueProperties
	topics map[string]*raftbusv1.TopicProperties
	subs   map[string]*raftbusv1.SubscriptionProperties    // by topic/sub
	rules  map[string]map[string]*raftbusv1.RuleProperties // by topic/sub, name
	counts map[string]*raftbusv1.RuntimeProperties         // by entity path
	writes []proto.Message                                 // creates, updates, deletes, in order
	// fail, when set, is asked before each call what it fails with
	// (nil: nothing).
	fail func(method string) error
}

var created = timestamppb.New(timestamppb.Now().AsTime().Truncate(1e6))

func newFakeAdmin() *fakeAdmin {
	return &fakeAdmin{queues: map[string]*raftbusv1.QueueProperties{}, topics: map[string]*raftbusv1.TopicProperties{},
		subs: map[string]*raftbusv1.SubscriptionProperties{}, rules: map[string]map[string]*raftbusv1.RuleProperties{},
		counts: map[string]*raftbusv1.RuntimeProperties{}}
}

func (f *fakeAdmin) call(method string, write proto.Message) error {
	if f.fail != nil {
		if err := f.fail(method); err != nil {
			return apierror.Status(err)
		}
	}
	if write != nil {
		f.writes = append(f.writes, proto.Clone(write))
	}
	return nil
}

func notFound(what string) error {
	return apierror.Status(apierror.NotFound("%s does not exist", what))
}
func exists(what string) error {
	return apierror.Status(apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "%s exists", what))
}
func subKey(topic, sub string) string { return topic + "/" + sub }

func (f *fakeAdmin) CreateQueue(_ context.Context, req *raftbusv1.CreateQueueRequest, _ ...grpc.CallOption) (*raftbusv1.CreateQueueResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateQueue", req); err != nil {
		return nil, err
	}
	name := req.GetQueue().GetName()
	if f.queues[name] != nil || f.topics[name] != nil {
		return nil, exists(name)
	}
	q := proto.Clone(req.GetQueue()).(*raftbusv1.QueueProperties)
	q.CreatedAt, q.UpdatedAt = created, created
	if q.PartitionCount == nil {
		q.PartitionCount = proto.Uint32(1)
	}
	f.queues[name] = q
	return &raftbusv1.CreateQueueResponse{Queue: q}, nil
}

func (f *fakeAdmin) GetQueue(_ context.Context, req *raftbusv1.GetQueueRequest, _ ...grpc.CallOption) (*raftbusv1.GetQueueResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("GetQueue", nil); err != nil {
		return nil, err
	}
	q := f.queues[req.GetName()]
	if q == nil {
		return nil, notFound(req.GetName())
	}
	return &raftbusv1.GetQueueResponse{Queue: q}, nil
}

func (f *fakeAdmin) UpdateQueue(_ context.Context, req *raftbusv1.UpdateQueueRequest, _ ...grpc.CallOption) (*raftbusv1.UpdateQueueResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("UpdateQueue", req); err != nil {
		return nil, err
	}
	q := f.queues[req.GetQueue().GetName()]
	if q == nil {
		return nil, notFound(req.GetQueue().GetName())
	}
	proto.Merge(q, req.GetQueue())
	return &raftbusv1.UpdateQueueResponse{Queue: q}, nil
}

func (f *fakeAdmin) DeleteQueue(_ context.Context, req *raftbusv1.DeleteQueueRequest, _ ...grpc.CallOption) (*raftbusv1.DeleteQueueResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queues[req.GetName()] == nil {
		return nil, notFound(req.GetName())
	}
	if err := f.call("DeleteQueue", req); err != nil {
		return nil, err
	}
	delete(f.queues, req.GetName())
	return &raftbusv1.DeleteQueueResponse{}, nil
}

func (f *fakeAdmin) ListQueues(_ context.Context, req *raftbusv1.ListQueuesRequest, _ ...grpc.CallOption) (*raftbusv1.ListQueuesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListQueues", nil); err != nil {
		return nil, err
	}
	resp := &raftbusv1.ListQueuesResponse{}
	for _, name := range sortedNames(f.queues) {
		if name > req.GetPageToken() {
			resp.Queues = append(resp.Queues, f.queues[name])
		}
	}
	return resp, nil
}

func (f *fakeAdmin) GetQueueRuntimeProperties(_ context.Context, req *raftbusv1.GetQueueRuntimePropertiesRequest, _ ...grpc.CallOption) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
	return f.runtime("GetQueueRuntimeProperties", req.GetName(), func() bool { return f.queues[req.GetName()] != nil })
}

// runtime answers the counts of path, when exists (called locked) says
// it does.
func (f *fakeAdmin) runtime(method, path string, exists func() bool) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(method, nil); err != nil {
		return nil, err
	}
	if !exists() {
		return nil, notFound(path)
	}
	rt := f.counts[path]
	if rt == nil {
		rt = &raftbusv1.RuntimeProperties{EntityPath: path}
	}
	return &raftbusv1.GetQueueRuntimePropertiesResponse{Properties: rt}, nil
}

func (f *fakeAdmin) CreateTopic(_ context.Context, req *raftbusv1.CreateTopicRequest, _ ...grpc.CallOption) (*raftbusv1.CreateTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateTopic", req); err != nil {
		return nil, err
	}
	name := req.GetTopic().GetName()
	if f.queues[name] != nil || f.topics[name] != nil {
		return nil, exists(name)
	}
	t := proto.Clone(req.GetTopic()).(*raftbusv1.TopicProperties)
	t.CreatedAt, t.UpdatedAt = created, created
	if t.PartitionCount == nil {
		t.PartitionCount = proto.Uint32(1)
	}
	f.topics[name] = t
	return &raftbusv1.CreateTopicResponse{Topic: t}, nil
}

func (f *fakeAdmin) GetTopic(_ context.Context, req *raftbusv1.GetTopicRequest, _ ...grpc.CallOption) (*raftbusv1.GetTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("GetTopic", nil); err != nil {
		return nil, err
	}
	t := f.topics[req.GetName()]
	if t == nil {
		return nil, notFound(req.GetName())
	}
	return &raftbusv1.GetTopicResponse{Topic: t}, nil
}

func (f *fakeAdmin) UpdateTopic(_ context.Context, req *raftbusv1.UpdateTopicRequest, _ ...grpc.CallOption) (*raftbusv1.UpdateTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("UpdateTopic", req); err != nil {
		return nil, err
	}
	t := f.topics[req.GetTopic().GetName()]
	if t == nil {
		return nil, notFound(req.GetTopic().GetName())
	}
	proto.Merge(t, req.GetTopic())
	return &raftbusv1.UpdateTopicResponse{Topic: t}, nil
}

func (f *fakeAdmin) DeleteTopic(_ context.Context, req *raftbusv1.DeleteTopicRequest, _ ...grpc.CallOption) (*raftbusv1.DeleteTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.topics[req.GetName()] == nil {
		return nil, notFound(req.GetName())
	}
	if err := f.call("DeleteTopic", req); err != nil {
		return nil, err
	}
	delete(f.topics, req.GetName())
	return &raftbusv1.DeleteTopicResponse{}, nil
}

func (f *fakeAdmin) ListTopics(_ context.Context, req *raftbusv1.ListTopicsRequest, _ ...grpc.CallOption) (*raftbusv1.ListTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &raftbusv1.ListTopicsResponse{}
	for _, name := range sortedNames(f.topics) {
		if name > req.GetPageToken() {
			resp.Topics = append(resp.Topics, f.topics[name])
		}
	}
	return resp, nil
}

func (f *fakeAdmin) GetTopicRuntimeProperties(_ context.Context, req *raftbusv1.GetTopicRuntimePropertiesRequest, _ ...grpc.CallOption) (*raftbusv1.GetTopicRuntimePropertiesResponse, error) {
	resp, err := f.runtime("GetTopicRuntimeProperties", req.GetName(), func() bool { return f.topics[req.GetName()] != nil })
	return &raftbusv1.GetTopicRuntimePropertiesResponse{Properties: resp.GetProperties()}, err
}

func (f *fakeAdmin) CreateSubscription(_ context.Context, req *raftbusv1.CreateSubscriptionRequest, _ ...grpc.CallOption) (*raftbusv1.CreateSubscriptionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateSubscription", req); err != nil {
		return nil, err
	}
	s := proto.Clone(req.GetSubscription()).(*raftbusv1.SubscriptionProperties)
	if f.topics[s.GetTopicName()] == nil {
		return nil, notFound(s.GetTopicName())
	}
	key := subKey(s.GetTopicName(), s.GetSubscriptionName())
	if f.subs[key] != nil {
		return nil, exists(key)
	}
	s.CreatedAt, s.UpdatedAt = created, created
	f.subs[key] = s
	rule := req.GetDefaultRule()
	if rule == nil {
		rule = &raftbusv1.RuleProperties{Name: "$Default", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}}}
	}
	f.rules[key] = map[string]*raftbusv1.RuleProperties{rule.GetName(): rule}
	return &raftbusv1.CreateSubscriptionResponse{Subscription: s}, nil
}

func (f *fakeAdmin) GetSubscription(_ context.Context, req *raftbusv1.GetSubscriptionRequest, _ ...grpc.CallOption) (*raftbusv1.GetSubscriptionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.subs[subKey(req.GetTopicName(), req.GetSubscriptionName())]
	if s == nil {
		return nil, notFound(subKey(req.GetTopicName(), req.GetSubscriptionName()))
	}
	return &raftbusv1.GetSubscriptionResponse{Subscription: s}, nil
}

func (f *fakeAdmin) UpdateSubscription(_ context.Context, req *raftbusv1.UpdateSubscriptionRequest, _ ...grpc.CallOption) (*raftbusv1.UpdateSubscriptionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("UpdateSubscription", req); err != nil {
		return nil, err
	}
	s := f.subs[subKey(req.GetSubscription().GetTopicName(), req.GetSubscription().GetSubscriptionName())]
	if s == nil {
		return nil, notFound(req.GetSubscription().GetSubscriptionName())
	}
	proto.Merge(s, req.GetSubscription())
	return &raftbusv1.UpdateSubscriptionResponse{Subscription: s}, nil
}

func (f *fakeAdmin) DeleteSubscription(_ context.Context, req *raftbusv1.DeleteSubscriptionRequest, _ ...grpc.CallOption) (*raftbusv1.DeleteSubscriptionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := subKey(req.GetTopicName(), req.GetSubscriptionName())
	if f.subs[key] == nil {
		return nil, notFound(key)
	}
	if err := f.call("DeleteSubscription", req); err != nil {
		return nil, err
	}
	delete(f.subs, key)
	delete(f.rules, key)
	return &raftbusv1.DeleteSubscriptionResponse{}, nil
}

func (f *fakeAdmin) ListSubscriptions(_ context.Context, req *raftbusv1.ListSubscriptionsRequest, _ ...grpc.CallOption) (*raftbusv1.ListSubscriptionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.topics[req.GetTopicName()] == nil {
		return nil, notFound(req.GetTopicName())
	}
	resp := &raftbusv1.ListSubscriptionsResponse{}
	for _, key := range sortedNames(f.subs) {
		if topic, name, _ := strings.Cut(key, "/"); topic == req.GetTopicName() && name > req.GetPageToken() {
			resp.Subscriptions = append(resp.Subscriptions, f.subs[key])
		}
	}
	return resp, nil
}

func (f *fakeAdmin) GetSubscriptionRuntimeProperties(_ context.Context, req *raftbusv1.GetSubscriptionRuntimePropertiesRequest, _ ...grpc.CallOption) (*raftbusv1.GetSubscriptionRuntimePropertiesResponse, error) {
	key := subKey(req.GetTopicName(), req.GetSubscriptionName())
	resp, err := f.runtime("GetSubscriptionRuntimeProperties", req.GetTopicName()+"/subscriptions/"+req.GetSubscriptionName(), func() bool { return f.subs[key] != nil })
	return &raftbusv1.GetSubscriptionRuntimePropertiesResponse{Properties: resp.GetProperties()}, err
}

func (f *fakeAdmin) CreateRule(_ context.Context, req *raftbusv1.CreateRuleRequest, _ ...grpc.CallOption) (*raftbusv1.CreateRuleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateRule", req); err != nil {
		return nil, err
	}
	rules := f.rules[subKey(req.GetTopicName(), req.GetSubscriptionName())]
	if rules == nil {
		return nil, notFound(req.GetSubscriptionName())
	}
	if rules[req.GetRule().GetName()] != nil {
		return nil, exists(req.GetRule().GetName())
	}
	r := proto.Clone(req.GetRule()).(*raftbusv1.RuleProperties)
	r.CreatedAt = created
	rules[r.GetName()] = r
	return &raftbusv1.CreateRuleResponse{Rule: r}, nil
}

func (f *fakeAdmin) GetRule(_ context.Context, req *raftbusv1.GetRuleRequest, _ ...grpc.CallOption) (*raftbusv1.GetRuleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rules[subKey(req.GetTopicName(), req.GetSubscriptionName())][req.GetRuleName()]
	if r == nil {
		return nil, notFound(req.GetRuleName())
	}
	return &raftbusv1.GetRuleResponse{Rule: r}, nil
}

func (f *fakeAdmin) UpdateRule(_ context.Context, req *raftbusv1.UpdateRuleRequest, _ ...grpc.CallOption) (*raftbusv1.UpdateRuleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("UpdateRule", req); err != nil {
		return nil, err
	}
	rules := f.rules[subKey(req.GetTopicName(), req.GetSubscriptionName())]
	old := rules[req.GetRule().GetName()]
	if old == nil {
		return nil, notFound(req.GetRule().GetName())
	}
	r := proto.Clone(req.GetRule()).(*raftbusv1.RuleProperties)
	r.CreatedAt = old.GetCreatedAt()
	rules[r.GetName()] = r
	return &raftbusv1.UpdateRuleResponse{Rule: r}, nil
}

func (f *fakeAdmin) DeleteRule(_ context.Context, req *raftbusv1.DeleteRuleRequest, _ ...grpc.CallOption) (*raftbusv1.DeleteRuleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rules := f.rules[subKey(req.GetTopicName(), req.GetSubscriptionName())]
	if rules[req.GetRuleName()] == nil {
		return nil, notFound(req.GetRuleName())
	}
	if err := f.call("DeleteRule", req); err != nil {
		return nil, err
	}
	delete(rules, req.GetRuleName())
	return &raftbusv1.DeleteRuleResponse{}, nil
}

func (f *fakeAdmin) ListRules(_ context.Context, req *raftbusv1.ListRulesRequest, _ ...grpc.CallOption) (*raftbusv1.ListRulesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rules := f.rules[subKey(req.GetTopicName(), req.GetSubscriptionName())]
	if rules == nil {
		return nil, notFound(req.GetSubscriptionName())
	}
	resp := &raftbusv1.ListRulesResponse{}
	for _, name := range sortedNames(rules) {
		if name > req.GetPageToken() {
			resp.Rules = append(resp.Rules, rules[name])
		}
	}
	return resp, nil
}

func sortedNames[T any](m map[string]T) []string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
