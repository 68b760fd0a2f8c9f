package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const topicUsage = `Usage:
  raftbus topic create <name> [--partitions n] [--ttl d] [--duplicate-detection]
                              [--duplicate-window d] [--max-size-mb n] [--max-message-size-kb n]
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
--forward-dead-letters-to name. --sql makes the first rule a SQL filter
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

func runTopic(ctx context.Context, a *app, args []string) error {
	var settings *entitySettings
	c, err := a.adminCommand(ctx, "topic", args, nil, func(fs *flag.FlagSet) { settings = newEntitySettings(fs) })
	if err != nil {
		return err
	}
	defer c.done()
	v, pos, ad, ctx := c.verb, c.pos, c.ad, c.ctx
	switch v {
	case "create":
		t, err := ad.CreateTopic(ctx, pos[0], settings.topic())
		return a.show(t, err, "created topic "+pos[0])
	case "update":
		t, err := ad.UpdateTopic(ctx, pos[0], settings.topic())
		return a.show(t, err, "updated topic "+pos[0])
	case "get":
		t, err := ad.GetTopic(ctx, pos[0])
		return a.show(t, err, "topic "+pos[0])
	case "delete":
		if err := ad.DeleteTopic(ctx, pos[0]); err != nil {
			return err
		}
		return a.done("deleted topic "+pos[0], map[string]string{"deleted": pos[0]})
	}
	ts, err := ad.ListTopics(ctx)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return printProtoList(a, ts)
	}
	var rows [][]string
	for _, t := range ts {
		rows = append(rows, []string{t.GetName(), fmt.Sprint(t.GetPartitionCount()), yesNo(t.GetRequiresDuplicateDetection())})
	}
	a.table([]string{"NAME", "PARTITIONS", "DEDUP"}, rows)
	return nil
}

func runSubscription(ctx context.Context, a *app, args []string) error {
	var settings *entitySettings
	var sql *string
	c, err := a.adminCommand(ctx, "subscription", args, []string{"topic"}, func(fs *flag.FlagSet) {
		settings = newEntitySettings(fs)
		sql = fs.String("sql", "", "")
	})
	if err != nil {
		return err
	}
	defer c.done()
	v, pos, ad, ctx := c.verb, c.pos, c.ad, c.ctx
	switch v {
	case "create":
		var rule *admin.RuleProperties
		if *sql != "" {
			rule = &admin.RuleProperties{Name: "$Default", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: *sql}}}}
		}
		s, err := ad.CreateSubscription(ctx, pos[0], pos[1], settings.subscription(), rule)
		return a.show(s, err, "created subscription "+pos[0]+"/"+pos[1])
	case "update":
		s, err := ad.UpdateSubscription(ctx, pos[0], pos[1], settings.subscription())
		return a.show(s, err, "updated subscription "+pos[0]+"/"+pos[1])
	case "get":
		s, err := ad.GetSubscription(ctx, pos[0], pos[1])
		return a.show(s, err, "subscription "+pos[0]+"/"+pos[1])
	case "delete":
		if err := ad.DeleteSubscription(ctx, pos[0], pos[1]); err != nil {
			return err
		}
		return a.done("deleted subscription "+pos[0]+"/"+pos[1], map[string]string{"deleted": pos[0] + "/" + pos[1]})
	}
	subs, err := ad.ListSubscriptions(ctx, pos[0])
	if err != nil {
		return err
	}
	if a.output == "json" {
		return printProtoList(a, subs)
	}
	var rows [][]string
	for _, s := range subs {
		rows = append(rows, []string{s.GetSubscriptionName(), s.GetLockDuration().AsDuration().String(), fmt.Sprint(s.GetMaxDeliveryCount()), yesNo(s.GetRequiresSession())})
	}
	a.table([]string{"NAME", "LOCK", "MAX DELIVERIES", "SESSIONS"}, rows)
	return nil
}

func runRule(ctx context.Context, a *app, args []string) error {
	var sql, correlation, action *string
	var always, never *bool
	c, err := a.adminCommand(ctx, "rule", args, []string{"topic", "subscription"}, func(fs *flag.FlagSet) {
		sql = fs.String("sql", "", "")
		correlation = fs.String("correlation-id", "", "")
		always = fs.Bool("true", false, "")
		never = fs.Bool("false", false, "")
		action = fs.String("action", "", "")
	})
	if err != nil {
		return err
	}
	defer c.done()
	v, pos, ad, ctx := c.verb, c.pos, c.ad, c.ctx
	rule := func() (*admin.RuleProperties, error) {
		r := &admin.RuleProperties{Name: pos[2], Filter: &raftbusv1.RuleFilter{}}
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
	switch v {
	case "create", "update":
		r, err := rule()
		if err != nil {
			return err
		}
		if v == "create" {
			r, err = ad.CreateRule(ctx, pos[0], pos[1], r)
		} else {
			r, err = ad.UpdateRule(ctx, pos[0], pos[1], r)
		}
		return a.show(r, err, v+"d rule "+pos[2])
	case "get":
		r, err := ad.GetRule(ctx, pos[0], pos[1], pos[2])
		return a.show(r, err, "rule "+pos[2])
	case "delete":
		if err := ad.DeleteRule(ctx, pos[0], pos[1], pos[2]); err != nil {
			return err
		}
		return a.done("deleted rule "+pos[2], map[string]string{"deleted": pos[2]})
	}
	rules, err := ad.ListRules(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if a.output == "json" {
		return printProtoList(a, rules)
	}
	var rows [][]string
	for _, r := range rules {
		rows = append(rows, []string{r.GetName(), describeFilter(r.GetFilter()), r.GetAction().GetSqlExpression()})
	}
	a.table([]string{"NAME", "FILTER", "ACTION"}, rows)
	return nil
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
