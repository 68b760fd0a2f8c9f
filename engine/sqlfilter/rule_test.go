package sqlfilter

import (
	"testing"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestCompileRuleFilter(t *testing.T) {
	m := sampleMessage()
	for _, tc := range []struct {
		name string
		f    *raftbusv1.RuleFilter
		want bool
	}{
		{"nil is true", nil, true},
		{"unset is true", &raftbusv1.RuleFilter{}, true},
		{"true", &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}}, true},
		{"false", &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}}, false},
		{"sql", &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{
			SqlExpression: "quantity > @n", Parameters: map[string]*raftbusv1.PropertyValue{
				"@n": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 11}}}}}}, true},
		{"correlation", &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_CorrelationFilter{
			CorrelationFilter: &raftbusv1.CorrelationFilter{Subject: "other"}}}, false},
	} {
		mt, err := CompileRuleFilter(tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got, err := mt.Match(m); got != tc.want || err != nil {
			t.Errorf("%s: Match = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := CompileRuleFilter(&raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{
		SqlFilter: &raftbusv1.SqlFilter{SqlExpression: "a ="}}}); err == nil {
		t.Error("a malformed SQL filter compiled")
	}
}
