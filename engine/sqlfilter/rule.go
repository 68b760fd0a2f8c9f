package sqlfilter

import raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"

// Matcher decides whether a message belongs in a subscription. *Filter is
// one; CompileRuleFilter adapts the other kinds of rule filter.
type Matcher interface {
	Match(m Message) (bool, error)
}

// CompileRuleFilter compiles any kind of rule filter. A nil filter, or one
// with no kind set, is a TrueFilter, as for a subscription's $Default rule.
func CompileRuleFilter(f *raftbusv1.RuleFilter) (Matcher, error) {
	switch x := f.GetFilter().(type) {
	case *raftbusv1.RuleFilter_SqlFilter:
		return ParseSQLFilter(x.SqlFilter)
	case *raftbusv1.RuleFilter_CorrelationFilter:
		c, err := NewCorrelationFilter(x.CorrelationFilter)
		if err != nil {
			return nil, err
		}
		return correlationMatcher{c}, nil
	case *raftbusv1.RuleFilter_FalseFilter:
		return constMatcher(false), nil
	}
	return constMatcher(true), nil
}

type correlationMatcher struct{ c *CorrelationFilter }

func (m correlationMatcher) Match(msg Message) (bool, error) { return m.c.Match(msg), nil }

type constMatcher bool

func (c constMatcher) Match(Message) (bool, error) { return bool(c), nil }
