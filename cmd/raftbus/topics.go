package main

import (
	"flag"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const topicUsage = `Usage:
  raftbus topic create <name> [--partitions n] [--ttl d] [--duplicate-detection]
                              [--duplicate-window d] [--max-size-mb n] [--max-message-size-kb n]
                              [--auto-delete-on-idle d|never]
  raftbus topic update <name> [settings]
  raftbus topic get <name>
  raftbus topic delete <name>
  raftbus topic list

Examples:
  raftbus topic create events --partitions 2
  raftbus topic list --output json
`

const subscriptionUsage = `Usage:
  raftbus subscription create <topic> <name> [settings] [--sql 'filter']
  raftbus subscription update <topic> <name> [settings]
  raftbus subscription get <topic> <name>
  raftbus subscription delete <topic> <name>
  raftbus subscription list <topic>

Settings: --lock-duration d, --max-delivery-count n, --requires-session,
--ttl d, --dead-letter-on-expiration, --forward-to name,
--forward-dead-letters-to name, --auto-delete-on-idle d|never (at least
5m; receives, peeks, settlements and management calls are uses). --sql makes the first rule a SQL filter
instead of "$Default" (every message).

Examples:
  raftbus subscription create events audit
  raftbus subscription create events eu --sql "region = 'eu'"
`

const ruleUsage = `Usage:
  raftbus rule create <topic> <subscription> <name> (--sql 'expr' | --correlation-id id | --true | --false) [--action 'SET ...']
  raftbus rule update <topic> <subscription> <name> (filter flags as for create)
  raftbus rule get <topic> <subscription> <name>
  raftbus rule delete <topic> <subscription> <name>
  raftbus rule list <topic> <subscription>

Examples:
  raftbus rule create events eu high --sql "priority > 5" --action "SET sys.Label = 'urgent'"
  raftbus rule delete events eu '$Default'
`

var topicKind = adminKind{
	name:  "topic",
	label: func(pos []string) string { return pos[0] },
	flags: func(fs *flag.FlagSet) adminActions {
		settings := newEntitySettings(fs)
		return adminActions{
			create: func(c *adminCall) (proto.Message, error) { return c.ad.CreateTopic(c.ctx, c.pos[0], settings.topic()) },
			update: func(c *adminCall) (proto.Message, error) { return c.ad.UpdateTopic(c.ctx, c.pos[0], settings.topic()) },
			get:    func(c *adminCall) (proto.Message, error) { return c.ad.GetTopic(c.ctx, c.pos[0]) },
			delete: func(c *adminCall) error { return c.ad.DeleteTopic(c.ctx, c.pos[0]) },
			header: []string{"NAME", "PARTITIONS", "DEDUP"},
			list: func(c *adminCall) ([]proto.Message, [][]string, error) {
				ts, err := c.ad.ListTopics(c.ctx)
				return listed(ts, err, func(t *admin.TopicProperties) []string {
					return []string{t.GetName(), fmt.Sprint(t.GetPartitionCount()), yesNo(t.GetRequiresDuplicateDetection())}
				})
			},
		}
	},
}

var subscriptionKind = adminKind{
	name:    "subscription",
	parents: []string{"topic"},
	label:   func(pos []string) string { return pos[0] + "/" + pos[1] },
	flags: func(fs *flag.FlagSet) adminActions {
		settings := newEntitySettings(fs)
		sql := fs.String("sql", "", "")
		return adminActions{
			create: func(c *adminCall) (proto.Message, error) {
				var rule *admin.RuleProperties
				if *sql != "" {
					rule = &admin.RuleProperties{Name: "$Default", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: *sql}}}}
				}
				return c.ad.CreateSubscription(c.ctx, c.pos[0], c.pos[1], settings.subscription(), rule)
			},
			update: func(c *adminCall) (proto.Message, error) {
				return c.ad.UpdateSubscription(c.ctx, c.pos[0], c.pos[1], settings.subscription())
			},
			get:    func(c *adminCall) (proto.Message, error) { return c.ad.GetSubscription(c.ctx, c.pos[0], c.pos[1]) },
			delete: func(c *adminCall) error { return c.ad.DeleteSubscription(c.ctx, c.pos[0], c.pos[1]) },
			header: []string{"NAME", "LOCK", "MAX DELIVERIES", "SESSIONS"},
			list: func(c *adminCall) ([]proto.Message, [][]string, error) {
				subs, err := c.ad.ListSubscriptions(c.ctx, c.pos[0])
				return listed(subs, err, func(s *admin.SubscriptionProperties) []string {
					return []string{s.GetSubscriptionName(), s.GetLockDuration().AsDuration().String(), fmt.Sprint(s.GetMaxDeliveryCount()), yesNo(s.GetRequiresSession())}
				})
			},
		}
	},
}

var ruleKind = adminKind{
	name:    "rule",
	parents: []string{"topic", "subscription"},
	label:   func(pos []string) string { return pos[2] },
	flags: func(fs *flag.FlagSet) adminActions {
		sql := fs.String("sql", "", "")
		correlation := fs.String("correlation-id", "", "")
		always := fs.Bool("true", false, "")
		never := fs.Bool("false", false, "")
		action := fs.String("action", "", "")
		rule := func(name string) (*admin.RuleProperties, error) {
			r := &admin.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{}}
			switch {
			case *sql != "":
				r.Filter.Filter = &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: *sql}}
			case *correlation != "":
				r.Filter.Filter = &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: &raftbusv1.CorrelationFilter{CorrelationId: *correlation}}
			case *always:
				r.Filter.Filter = &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}
			case *never:
				r.Filter.Filter = &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}
			default:
				return nil, usagef("give a filter: --sql, --correlation-id, --true or --false")
			}
			if *action != "" {
				r.Action = &raftbusv1.SqlRuleAction{SqlExpression: *action}
			}
			return r, nil
		}
		return adminActions{
			create: func(c *adminCall) (proto.Message, error) {
				r, err := rule(c.pos[2])
				if err != nil {
					return nil, err
				}
				return c.ad.CreateRule(c.ctx, c.pos[0], c.pos[1], r)
			},
			update: func(c *adminCall) (proto.Message, error) {
				r, err := rule(c.pos[2])
				if err != nil {
					return nil, err
				}
				return c.ad.UpdateRule(c.ctx, c.pos[0], c.pos[1], r)
			},
			get:    func(c *adminCall) (proto.Message, error) { return c.ad.GetRule(c.ctx, c.pos[0], c.pos[1], c.pos[2]) },
			delete: func(c *adminCall) error { return c.ad.DeleteRule(c.ctx, c.pos[0], c.pos[1], c.pos[2]) },
			header: []string{"NAME", "FILTER", "ACTION"},
			list: func(c *adminCall) ([]proto.Message, [][]string, error) {
				rules, err := c.ad.ListRules(c.ctx, c.pos[0], c.pos[1])
				return listed(rules, err, func(r *admin.RuleProperties) []string {
					return []string{r.GetName(), describeFilter(r.GetFilter()), r.GetAction().GetSqlExpression()}
				})
			},
		}
	},
}

func describeFilter(f *raftbusv1.RuleFilter) string {
	switch x := f.GetFilter().(type) {
	case *raftbusv1.RuleFilter_SqlFilter:
		return x.SqlFilter.GetSqlExpression()
	case *raftbusv1.RuleFilter_CorrelationFilter:
		return "correlation " + x.CorrelationFilter.GetCorrelationId()
	case *raftbusv1.RuleFilter_TrueFilter:
		return "TRUE"
	case *raftbusv1.RuleFilter_FalseFilter:
		return "FALSE"
	}
	return ""
}
