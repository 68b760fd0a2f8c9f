package service

import (
	"context"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/engine"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Topics, subscriptions and rules are metadata like queues: committed by
// the metadata leader, then configured into every partition of the topic
// by the partition leaders (cluster's configureTopic). A subscription
// lives in its topic's partitions.

func (s *Admin) CreateTopic(ctx context.Context, req *raftbusv1.CreateTopicRequest) (*raftbusv1.CreateTopicResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.CreateTopicResponse, error) {
		t := proto.Clone(req.GetTopic()).(*raftbusv1.TopicProperties)
		if t == nil {
			return nil, apierror.Invalid("topic is required")
		}
		if t.PartitionCount == nil {
			t.PartitionCount = proto.Uint32(s.cfg.DefaultPartitions)
		}
		e, err := s.putTopic(ctx, t, true)
		if err != nil {
			return nil, err
		}
		if err := s.awaitReady(ctx, e); err != nil {
			return nil, err
		}
		return &raftbusv1.CreateTopicResponse{Topic: e.GetTopic()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.CreateTopicResponse, error) {
		return c.CreateTopic(ctx, req)
	})
}

func (s *Admin) UpdateTopic(ctx context.Context, req *raftbusv1.UpdateTopicRequest) (*raftbusv1.UpdateTopicResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.UpdateTopicResponse, error) {
		t := req.GetTopic()
		if t == nil {
			return nil, apierror.Invalid("topic is required")
		}
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			if old := meta.FindEntity(st, t.GetName()).GetTopic(); old != nil {
				t = overlay(old, t)
			}
		})
		e, err := s.putTopic(ctx, t, false)
		if err != nil {
			return nil, err
		}
		if err := s.awaitConfigured(ctx, e); err != nil {
			return nil, err
		}
		return &raftbusv1.UpdateTopicResponse{Topic: e.GetTopic()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.UpdateTopicResponse, error) {
		return c.UpdateTopic(ctx, req)
	})
}

func (s *Admin) putTopic(ctx context.Context, t *raftbusv1.TopicProperties, create bool) (*clusterv1.Entity, error) {
	if err := checkEntityName("topic", t.GetName()); err != nil {
		return nil, err
	}
	t, err := engine.NormalizeTopicProperties(t)
	if err != nil {
		return nil, apierror.From(err)
	}
	if t.GetPartitionCount() > MaxPartitions {
		return nil, apierror.Invalid("partition_count must be between 1 and %d, not %d", MaxPartitions, t.GetPartitionCount())
	}
	res, err := s.node.Commit(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutTopic{PutTopic: &clusterv1.PutTopic{Topic: t, Create: create}}})
	if err != nil {
		return nil, err
	}
	return res.GetEntity(), nil
}

func (s *Admin) GetTopic(ctx context.Context, req *raftbusv1.GetTopicRequest) (*raftbusv1.GetTopicResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.GetTopicResponse, error) {
		e, err := s.topic(ctx, req.GetName())
		if err != nil {
			return nil, err
		}
		return &raftbusv1.GetTopicResponse{Topic: e.GetTopic()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.GetTopicResponse, error) {
		return c.GetTopic(ctx, req)
	})
}

func (s *Admin) DeleteTopic(ctx context.Context, req *raftbusv1.DeleteTopicRequest) (*raftbusv1.DeleteTopicResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.DeleteTopicResponse, error) {
		if _, err := s.topic(ctx, req.GetName()); err != nil {
			return nil, err
		}
		_, err := s.node.Commit(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: req.GetName()}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.DeleteTopicResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.DeleteTopicResponse, error) {
		return c.DeleteTopic(ctx, req)
	})
}

func (s *Admin) ListTopics(ctx context.Context, req *raftbusv1.ListTopicsRequest) (*raftbusv1.ListTopicsResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.ListTopicsResponse, error) {
		size, err := pageSize(req.GetPageSize())
		if err != nil {
			return nil, err
		}
		resp := &raftbusv1.ListTopicsResponse{}
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			i := sort.Search(len(st.Entities), func(i int) bool { return st.Entities[i].GetName() > req.GetPageToken() })
			for ; i < len(st.Entities); i++ {
				if len(resp.Topics) == size {
					resp.NextPageToken = resp.Topics[size-1].GetName()
					break
				}
				if t := st.Entities[i].GetTopic(); t != nil {
					resp.Topics = append(resp.Topics, proto.Clone(t).(*raftbusv1.TopicProperties))
				}
			}
		})
		return resp, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.ListTopicsResponse, error) {
		return c.ListTopics(ctx, req)
	})
}

func (s *Admin) GetTopicRuntimeProperties(ctx context.Context, req *raftbusv1.GetTopicRuntimePropertiesRequest) (*raftbusv1.GetTopicRuntimePropertiesResponse, error) {
	e, err := s.topic(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	props, err := s.runtimeProperties(ctx, e, e.GetName())
	if err != nil {
		return nil, err
	}
	props.CreatedAt, props.UpdatedAt = e.GetTopic().GetCreatedAt(), e.GetTopic().GetUpdatedAt()
	props.SubscriptionCount = int32(len(e.GetSubscriptions()))
	return &raftbusv1.GetTopicRuntimePropertiesResponse{Properties: props}, nil
}

func (s *Admin) CreateSubscription(ctx context.Context, req *raftbusv1.CreateSubscriptionRequest) (*raftbusv1.CreateSubscriptionResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.CreateSubscriptionResponse, error) {
		rule := req.GetDefaultRule()
		if rule == nil {
			rule = &raftbusv1.RuleProperties{Name: "$Default", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}}}
		}
		if err := engine.ValidateRule(rule); err != nil {
			return nil, apierror.From(err)
		}
		sub, err := s.putSubscription(ctx, req.GetSubscription(), []*raftbusv1.RuleProperties{rule}, true)
		if err != nil {
			return nil, err
		}
		return &raftbusv1.CreateSubscriptionResponse{Subscription: sub.GetProperties()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.CreateSubscriptionResponse, error) {
		return c.CreateSubscription(ctx, req)
	})
}

func (s *Admin) UpdateSubscription(ctx context.Context, req *raftbusv1.UpdateSubscriptionRequest) (*raftbusv1.UpdateSubscriptionResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.UpdateSubscriptionResponse, error) {
		p := req.GetSubscription()
		s.node.View(func(st *clusterv1.MetaSnapshot) {
			if old := meta.FindSubscription(meta.FindEntity(st, p.GetTopicName()), p.GetSubscriptionName()); old != nil {
				p = overlay(old.GetProperties(), p)
			}
		})
		sub, err := s.putSubscription(ctx, p, nil, false)
		if err != nil {
			return nil, err
		}
		return &raftbusv1.UpdateSubscriptionResponse{Subscription: sub.GetProperties()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.UpdateSubscriptionResponse, error) {
		return c.UpdateSubscription(ctx, req)
	})
}

func (s *Admin) putSubscription(ctx context.Context, p *raftbusv1.SubscriptionProperties, rules []*raftbusv1.RuleProperties, create bool) (*clusterv1.Subscription, error) {
	if err := checkChildName("subscription", p.GetSubscriptionName()); err != nil {
		return nil, err
	}
	p, err := engine.NormalizeSubscriptionProperties(p)
	if err != nil {
		return nil, apierror.From(err)
	}
	res, err := s.changeTopic(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutSubscription{PutSubscription: &clusterv1.PutSubscription{
		Subscription: p, Rules: rules, Create: create, CheckForwarding: true,
	}}})
	if err != nil {
		return nil, err
	}
	return res.GetSubscription(), nil
}

func (s *Admin) GetSubscription(ctx context.Context, req *raftbusv1.GetSubscriptionRequest) (*raftbusv1.GetSubscriptionResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.GetSubscriptionResponse, error) {
		_, sub, err := s.node.Subscription(ctx, req.GetTopicName(), req.GetSubscriptionName())
		if err != nil {
			return nil, err
		}
		return &raftbusv1.GetSubscriptionResponse{Subscription: sub.GetProperties()}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.GetSubscriptionResponse, error) {
		return c.GetSubscription(ctx, req)
	})
}

func (s *Admin) DeleteSubscription(ctx context.Context, req *raftbusv1.DeleteSubscriptionRequest) (*raftbusv1.DeleteSubscriptionResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.DeleteSubscriptionResponse, error) {
		_, err := s.changeTopic(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteSubscription{DeleteSubscription: &clusterv1.DeleteSubscription{
			TopicName: req.GetTopicName(), SubscriptionName: req.GetSubscriptionName(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.DeleteSubscriptionResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.DeleteSubscriptionResponse, error) {
		return c.DeleteSubscription(ctx, req)
	})
}

func (s *Admin) ListSubscriptions(ctx context.Context, req *raftbusv1.ListSubscriptionsRequest) (*raftbusv1.ListSubscriptionsResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.ListSubscriptionsResponse, error) {
		size, err := pageSize(req.GetPageSize())
		if err != nil {
			return nil, err
		}
		e, err := s.topic(ctx, req.GetTopicName())
		if err != nil {
			return nil, err
		}
		resp := &raftbusv1.ListSubscriptionsResponse{}
		for _, sub := range e.GetSubscriptions() {
			if sub.GetProperties().GetSubscriptionName() <= req.GetPageToken() {
				continue
			}
			if len(resp.Subscriptions) == size {
				resp.NextPageToken = resp.Subscriptions[size-1].GetSubscriptionName()
				break
			}
			resp.Subscriptions = append(resp.Subscriptions, sub.GetProperties())
		}
		return resp, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.ListSubscriptionsResponse, error) {
		return c.ListSubscriptions(ctx, req)
	})
}

func (s *Admin) GetSubscriptionRuntimeProperties(ctx context.Context, req *raftbusv1.GetSubscriptionRuntimePropertiesRequest) (*raftbusv1.GetSubscriptionRuntimePropertiesResponse, error) {
	e, sub, err := s.node.Subscription(ctx, req.GetTopicName(), req.GetSubscriptionName())
	if err != nil {
		return nil, err
	}
	props, err := s.runtimeProperties(ctx, e, meta.SubscriptionPath(req.GetTopicName(), req.GetSubscriptionName()))
	if err != nil {
		return nil, err
	}
	props.CreatedAt, props.UpdatedAt = sub.GetProperties().GetCreatedAt(), sub.GetProperties().GetUpdatedAt()
	return &raftbusv1.GetSubscriptionRuntimePropertiesResponse{Properties: props}, nil
}

func (s *Admin) CreateRule(ctx context.Context, req *raftbusv1.CreateRuleRequest) (*raftbusv1.CreateRuleResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.CreateRuleResponse, error) {
		r, err := s.putRule(ctx, req.GetTopicName(), req.GetSubscriptionName(), req.GetRule(), true)
		if err != nil {
			return nil, err
		}
		return &raftbusv1.CreateRuleResponse{Rule: r}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.CreateRuleResponse, error) {
		return c.CreateRule(ctx, req)
	})
}

func (s *Admin) UpdateRule(ctx context.Context, req *raftbusv1.UpdateRuleRequest) (*raftbusv1.UpdateRuleResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.UpdateRuleResponse, error) {
		r, err := s.putRule(ctx, req.GetTopicName(), req.GetSubscriptionName(), req.GetRule(), false)
		if err != nil {
			return nil, err
		}
		return &raftbusv1.UpdateRuleResponse{Rule: r}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.UpdateRuleResponse, error) {
		return c.UpdateRule(ctx, req)
	})
}

// putRule validates a rule (a malformed filter is rejected here, with its
// position, never at send time) and commits it.
func (s *Admin) putRule(ctx context.Context, topic, sub string, r *raftbusv1.RuleProperties, create bool) (*raftbusv1.RuleProperties, error) {
	if err := checkChildName("rule", r.GetName()); err != nil {
		return nil, err
	}
	if err := engine.ValidateRule(r); err != nil {
		return nil, apierror.From(err)
	}
	res, err := s.changeTopic(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutRule{PutRule: &clusterv1.PutRule{
		TopicName: topic, SubscriptionName: sub, Rule: r, Create: create,
	}}})
	if err != nil {
		return nil, err
	}
	return res.GetRule(), nil
}

func (s *Admin) GetRule(ctx context.Context, req *raftbusv1.GetRuleRequest) (*raftbusv1.GetRuleResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.GetRuleResponse, error) {
		_, sub, err := s.node.Subscription(ctx, req.GetTopicName(), req.GetSubscriptionName())
		if err != nil {
			return nil, err
		}
		for _, r := range sub.GetRules() {
			if r.GetName() == req.GetRuleName() {
				return &raftbusv1.GetRuleResponse{Rule: r}, nil
			}
		}
		return nil, apierror.NotFound("rule %q of subscription %q does not exist", req.GetRuleName(), req.GetSubscriptionName())
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.GetRuleResponse, error) {
		return c.GetRule(ctx, req)
	})
}

func (s *Admin) DeleteRule(ctx context.Context, req *raftbusv1.DeleteRuleRequest) (*raftbusv1.DeleteRuleResponse, error) {
	return atMetaLeader(ctx, s.node, func() (*raftbusv1.DeleteRuleResponse, error) {
		_, err := s.changeTopic(ctx, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteRule{DeleteRule: &clusterv1.DeleteRule{
			TopicName: req.GetTopicName(), SubscriptionName: req.GetSubscriptionName(), RuleName: req.GetRuleName(),
		}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.DeleteRuleResponse{}, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.DeleteRuleResponse, error) {
		return c.DeleteRule(ctx, req)
	})
}

func (s *Admin) ListRules(ctx context.Context, req *raftbusv1.ListRulesRequest) (*raftbusv1.ListRulesResponse, error) {
	return readAtMetaLeader(ctx, s.node, func() (*raftbusv1.ListRulesResponse, error) {
		size, err := pageSize(req.GetPageSize())
		if err != nil {
			return nil, err
		}
		_, sub, err := s.node.Subscription(ctx, req.GetTopicName(), req.GetSubscriptionName())
		if err != nil {
			return nil, err
		}
		resp := &raftbusv1.ListRulesResponse{}
		for _, r := range sub.GetRules() {
			if r.GetName() <= req.GetPageToken() {
				continue
			}
			if len(resp.Rules) == size {
				resp.NextPageToken = resp.Rules[size-1].GetName()
				break
			}
			resp.Rules = append(resp.Rules, r)
		}
		return resp, nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) (*raftbusv1.ListRulesResponse, error) {
		return c.ListRules(ctx, req)
	})
}

// changeTopic commits a change to a topic's subscriptions or rules and
// waits until every partition applies it.
func (s *Admin) changeTopic(ctx context.Context, cmd *clusterv1.MetaCommand) (*clusterv1.MetaResult, error) {
	res, err := s.node.Commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := s.awaitConfigured(ctx, res.GetEntity()); err != nil {
		return nil, err
	}
	return res, nil
}

// topic returns the committed definition of a topic, or NOT_FOUND.
func (s *Admin) topic(ctx context.Context, name string) (*clusterv1.Entity, error) {
	e, err := s.node.Entity(ctx, name)
	if err != nil {
		return nil, err
	}
	if e.GetKind() != clusterv1.EntityKind_ENTITY_KIND_TOPIC {
		return nil, apierror.NotFound("%q is not a topic", name)
	}
	return e, nil
}

func pageSize(n int32) (int, error) {
	switch {
	case n == 0:
		return 100, nil
	case n < 0 || n > 1000:
		return 0, apierror.Invalid("page_size must be between 1 and 1000, not %d", n)
	}
	return int(n), nil
}
