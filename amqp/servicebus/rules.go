package servicebus

import (
	"context"
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A subscription's rules over its $management node, as the .NET, Java
// and JavaScript SDKs' rule managers use them: add-rule and remove-rule
// take a rule by name; enumerate-rules answers a page of rules as
// described types, each filter and action by its Service Bus descriptor.

const (
	descRuleDescription   = uint64(0x0000013700000004)
	descEmptyRuleAction   = uint64(0x0000013700000005)
	descSQLRuleAction     = uint64(0x0000013700000006)
	descSQLFilter         = uint64(0x0000001370000006)
	descTrueFilter        = uint64(0x0000001370000007)
	descFalseFilter       = uint64(0x0000001370000008)
	descCorrelationFilter = uint64(0x0000001370000009)
	// sqlCompatibilityLevel is what Service Bus answers for its SQL
	// filters and actions.
	sqlCompatibilityLevel = int32(20)
)

// The system properties of a correlation filter, in the order of its
// described list; the last field is the application properties.
var correlationFields = []string{"correlation-id", "message-id", "to", "reply-to", "label", "session-id", "reply-to-session-id", "content-type"}

// encodedValue is an amqp-value body section already encoded, for bodies
// with described types (which go-amqp's encoder does not take).
type encodedValue []byte

func ruleEntity(e entity) *goamqp.Message {
	if e.Subscription == "" {
		return status(400, fmt.Sprintf("rule operations need a subscription's $management node, not %s's", e.Path), nil)
	}
	return nil
}

func (c *connection) addRule(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	if resp := ruleEntity(e); resp != nil {
		return resp
	}
	name, _ := body["rule-name"].(string)
	desc, ok := body["rule-description"].(map[string]any)
	if name == "" || !ok {
		return status(400, "add-rule needs a rule-name string and a rule-description map", nil)
	}
	rule, err := ruleFromDescription(name, desc)
	if err != nil {
		return status(400, err.Error(), nil)
	}
	if _, err := c.admin.CreateRule(ctx, e.Topic, e.Subscription, rule); err != nil {
		return failure(err)
	}
	return status(200, "OK", map[string]any{})
}

// ruleFromDescription reads a rule-description map: one of sql-filter
// (with "1=1" and "1=0" the true and false filters, as the SDKs send
// them) or correlation-filter, and an optional sql-rule-action.
func ruleFromDescription(name string, desc map[string]any) (*raftbusv1.RuleProperties, error) {
	rule := &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{}}
	sql, isSQL := desc["sql-filter"].(map[string]any)
	corr, isCorr := desc["correlation-filter"].(map[string]any)
	switch {
	case isSQL && isCorr:
		return nil, fmt.Errorf("the rule-description has both a sql-filter and a correlation-filter")
	case isSQL:
		expr, ok := sql["expression"].(string)
		if !ok {
			return nil, fmt.Errorf("the sql-filter needs an expression string")
		}
		switch expr {
		case "1=1":
			rule.Filter.Filter = &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}
		case "1=0":
			rule.Filter.Filter = &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}
		default:
			rule.Filter.Filter = &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr}}
		}
	case isCorr:
		f, err := correlationFilter(corr)
		if err != nil {
			return nil, err
		}
		rule.Filter.Filter = &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: f}
	default:
		return nil, fmt.Errorf("the rule-description needs a sql-filter or a correlation-filter map")
	}
	switch a := desc["sql-rule-action"].(type) {
	case nil:
	case map[string]any:
		expr, ok := a["expression"].(string)
		if !ok {
			return nil, fmt.Errorf("the sql-rule-action needs an expression string")
		}
		rule.Action = &raftbusv1.SqlRuleAction{SqlExpression: expr}
	default:
		return nil, fmt.Errorf("the sql-rule-action is a %T, not a map", a)
	}
	return rule, nil
}

func correlationFilter(m map[string]any) (*raftbusv1.CorrelationFilter, error) {
	str := func(key string) (string, error) {
		switch v := m[key].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		}
		return "", fmt.Errorf("the correlation filter's %s is a %T, not a string", key, m[key])
	}
	var vals [8]string
	for i, k := range correlationFields {
		v, err := str(k)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	f := &raftbusv1.CorrelationFilter{CorrelationId: vals[0], MessageId: vals[1], To: vals[2], ReplyTo: vals[3],
		Subject: vals[4], SessionId: vals[5], ReplyToSessionId: vals[6], ContentType: vals[7]}
	switch props := m["properties"].(type) {
	case nil:
	case map[string]any:
		conv := make(map[string]any, len(props))
		for k, v := range props {
			pv, err := toPropertyValue(v)
			if err != nil {
				return nil, fmt.Errorf("the correlation filter's property %q: %v", k, err)
			}
			conv[k] = pv
		}
		out, err := client.PropertiesToProto(conv)
		if err != nil {
			return nil, err
		}
		f.ApplicationProperties = out
	default:
		return nil, fmt.Errorf("the correlation filter's properties are a %T, not a map", props)
	}
	return f, nil
}

func (c *connection) removeRule(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	if resp := ruleEntity(e); resp != nil {
		return resp
	}
	name, _ := body["rule-name"].(string)
	if name == "" {
		return status(400, "remove-rule needs a rule-name string", nil)
	}
	if err := c.admin.DeleteRule(ctx, e.Topic, e.Subscription, name); err != nil {
		return failure(err)
	}
	return status(200, "OK", map[string]any{})
}

func (c *connection) enumerateRules(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	if resp := ruleEntity(e); resp != nil {
		return resp
	}
	top, _ := body["top"].(int32)
	skip, _ := body["skip"].(int32)
	if top <= 0 || skip < 0 {
		return status(400, "enumerate-rules needs top > 0 and skip >= 0 (ints)", nil)
	}
	rules, err := c.admin.ListRules(ctx, e.Topic, e.Subscription)
	if err != nil {
		return failure(err)
	}
	if int(skip) >= len(rules) {
		return status(204, "No rules", nil)
	}
	rules = rules[skip:min(len(rules), int(skip)+int(top))]
	list := make([]any, 0, len(rules))
	for _, r := range rules {
		list = append(list, map[string]any{"rule-description": describedRule(r)})
	}
	b, err := amqp.Marshal(amqp.Described{Descriptor: uint64(0x77), Value: map[string]any{"rules": list}})
	if err != nil {
		return status(500, err.Error(), nil)
	}
	return status(200, "OK", encodedValue(b))
}

func describedRule(r *raftbusv1.RuleProperties) amqp.Described {
	var filter amqp.Described
	switch f := r.GetFilter().GetFilter().(type) {
	case *raftbusv1.RuleFilter_SqlFilter:
		filter = amqp.Described{Descriptor: descSQLFilter, Value: []any{f.SqlFilter.GetSqlExpression(), sqlCompatibilityLevel}}
	case *raftbusv1.RuleFilter_FalseFilter:
		filter = amqp.Described{Descriptor: descFalseFilter, Value: []any{}}
	case *raftbusv1.RuleFilter_CorrelationFilter:
		cf := f.CorrelationFilter
		fields := []any{}
		for _, v := range []string{cf.GetCorrelationId(), cf.GetMessageId(), cf.GetTo(), cf.GetReplyTo(), cf.GetSubject(),
			cf.GetSessionId(), cf.GetReplyToSessionId(), cf.GetContentType()} {
			if v == "" {
				fields = append(fields, nil)
			} else {
				fields = append(fields, v)
			}
		}
		props := client.PropertiesFromProto(cf.GetApplicationProperties())
		if props == nil {
			props = map[string]any{} // the list's last field is a map, empty or not
		}
		filter = amqp.Described{Descriptor: descCorrelationFilter, Value: append(fields, props)}
	default:
		filter = amqp.Described{Descriptor: descTrueFilter, Value: []any{}}
	}
	action := amqp.Described{Descriptor: descEmptyRuleAction, Value: []any{}}
	if a := r.GetAction(); a.GetSqlExpression() != "" {
		action = amqp.Described{Descriptor: descSQLRuleAction, Value: []any{a.GetSqlExpression(), sqlCompatibilityLevel}}
	}
	var created any
	if r.GetCreatedAt() != nil {
		created = r.GetCreatedAt().AsTime().Truncate(time.Millisecond)
	}
	return amqp.Described{Descriptor: descRuleDescription, Value: []any{filter, action, r.GetName(), created}}
}
