package sqlfilter

import (
	"errors"
	"testing"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestCorrelationFilter(t *testing.T) {
	str := func(s string) *raftbusv1.PropertyValue {
		return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_StringValue{StringValue: s}}
	}
	num := func(i int64) *raftbusv1.PropertyValue {
		return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_IntValue{IntValue: i}}
	}
	dbl := func(f float64) *raftbusv1.PropertyValue {
		return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: f}}
	}
	m := sampleMessage()
	for _, tc := range []struct {
		name string
		f    *raftbusv1.CorrelationFilter
		want bool
	}{
		{"empty filter matches all", &raftbusv1.CorrelationFilter{}, true},
		{"subject", &raftbusv1.CorrelationFilter{Subject: "order.created"}, true},
		{"subject differs", &raftbusv1.CorrelationFilter{Subject: "order.deleted"}, false},
		{"system fields are case-sensitive", &raftbusv1.CorrelationFilter{Subject: "Order.Created"}, false},
		{"every field", &raftbusv1.CorrelationFilter{MessageId: "msg-1", To: "warehouse", SessionId: "session-7",
			ContentType: "application/json", Subject: "order.created"}, true},
		{"one of several differs", &raftbusv1.CorrelationFilter{MessageId: "msg-1", To: "shop"}, false},
		{"missing system property", &raftbusv1.CorrelationFilter{CorrelationId: "c"}, false},
		{"missing reply-to", &raftbusv1.CorrelationFilter{ReplyTo: "r"}, false},
		{"missing reply-to session", &raftbusv1.CorrelationFilter{ReplyToSessionId: "r"}, false},
		{"application properties", &raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"color": str("red"), "quantity": num(12)}}, true},
		{"typed equality: int is not double", &raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"quantity": dbl(12)}}, false},
		{"typed equality: string is not int", &raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"quantity": str("12")}}, false},
		{"application property names are case-sensitive", &raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"COLOR": str("red")}}, false},
		{"missing application property", &raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"missing": str("x")}}, false},
		{"system and application", &raftbusv1.CorrelationFilter{Subject: "order.created",
			ApplicationProperties: map[string]*raftbusv1.PropertyValue{"price": dbl(2.5)}}, true},
	} {
		c, err := NewCorrelationFilter(tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := c.Match(m); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCorrelationFilterRejectsEmptyValue(t *testing.T) {
	_, err := NewCorrelationFilter(&raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"a": {}}})
	var ce *CorrelationError
	if !errors.As(err, &ce) || ce.Property != "a" {
		t.Errorf("got %v, want a *CorrelationError for a", err)
	}
}

func TestCorrelationFilterDoesNotAllocate(t *testing.T) {
	c, err := NewCorrelationFilter(&raftbusv1.CorrelationFilter{Subject: "order.created",
		ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"color": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "red"}}}})
	if err != nil {
		t.Fatal(err)
	}
	m := sampleMessage()
	if allocs := testing.AllocsPerRun(100, func() { c.Match(m) }); allocs != 0 {
		t.Errorf("%v allocations per Match, want 0", allocs)
	}
}
