package mgmtapi

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Every field of the entity protos has its element in the mapping, or is
// named here as carried otherwise: a field added to a proto fails this
// test until it is mapped (model.go), and then reads and writes
// everywhere.
func TestEveryPropertyHasAnElement(t *testing.T) {
	elsewhere := map[protoreflect.Name]string{
		"name":              "the path",
		"topic_name":        "the path",
		"subscription_name": "the path",
	}
	for _, c := range []struct {
		msg   proto.Message
		table []property
	}{
		{&raftbusv1.QueueProperties{}, queueProperties},
		{&raftbusv1.TopicProperties{}, topicProperties},
		{&raftbusv1.SubscriptionProperties{}, subscriptionProperties},
		{&raftbusv1.CorrelationFilter{}, append(correlationProperties, property{field: "application_properties"})},
	} {
		mapped := map[protoreflect.Name]bool{}
		for _, p := range c.table {
			mapped[p.field] = true
		}
		fields := c.msg.ProtoReflect().Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			name := fields.Get(i).Name()
			if !mapped[name] && elsewhere[name] == "" {
				t.Errorf("%s.%s has no element in the mapping", c.msg.ProtoReflect().Descriptor().Name(), name)
			}
		}
		for _, p := range c.table {
			if p.field != "" && fields.ByName(p.field) == nil {
				t.Errorf("%s of %s maps to no field %q", p.element, c.msg.ProtoReflect().Descriptor().Name(), p.field)
			}
		}
	}
}

// Every description written reads back as the same settings.
func TestDescriptionsReadBackAsTheirSettings(t *testing.T) {
	q := &raftbusv1.QueueProperties{LockDuration: sec(45), MaxDeliveryCount: proto.Int32(3), RequiresSession: proto.Bool(true),
		DefaultMessageTimeToLive: unlimitedDuration, DeadLetteringOnMessageExpiration: proto.Bool(true), RequiresDuplicateDetection: proto.Bool(false),
		DuplicateDetectionHistoryTimeWindow: sec(90), MaxSizeInMegabytes: proto.Int64(2048), MaxMessageSizeInKilobytes: proto.Int64(512),
		EnableBatchedOperations: proto.Bool(true), ForwardTo: "a/b", ForwardDeadLetteredMessagesTo: "dlq", PartitionCount: proto.Uint32(partitionedCount),
		AutoDeleteOnIdle: sec(600)}
	for _, version := range []apiVersion{"2021-05", "2024-05"} {
		var w xmlWriter
		writeDescription(&w, "QueueDescription", queueProperties, &description{settings: q.ProtoReflect(), runtime: &raftbusv1.RuntimeProperties{}, host: "h:1", version: version})
		root, err := parseXML([]byte(w.String()))
		if err != nil {
			t.Fatal(err)
		}
		got := &raftbusv1.QueueProperties{}
		if err := readProperties(queueProperties, root, got.ProtoReflect()); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(q, got) {
			t.Fatalf("%s: read back\n%v\nwrote\n%v\nas %s", version, got, q, w.String())
		}
	}
}

func TestDurationsAreXMLSchemaDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "PT0S", time.Minute: "PT1M", 30 * time.Second: "PT30S", 90 * time.Second: "PT1M30S", 1500 * time.Millisecond: "PT1.5S",
		14 * 24 * time.Hour: "P14D", 26*time.Hour + 3*time.Minute: "P1DT2H3M", unlimited: timeSpanMax,
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := parseDuration(want); err != nil || back != d {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", want, back, err, d)
		}
	}
	for s, want := range map[string]time.Duration{
		"P1Y": 365 * 24 * time.Hour, "P1M": 30 * 24 * time.Hour, "P1W": 7 * 24 * time.Hour, "PT0.0000001S": 100,
		"P10675199DT2H48M5.477539S": unlimited, "P999999999999D": unlimited, " PT5M ": 5 * time.Minute,
	} {
		if got, err := parseDuration(s); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "1M", "PT1H2H", "PT1M1H", "P1.5D", "PTxS", "-PT1S", "P1DT", "PT1..5S", "T1S"} {
		if d, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", bad, d)
		}
	}
}

// Every rule written reads back as the same rule.
func TestRulesReadBackAsTheirProperties(t *testing.T) {
	sql := sqlRule("b", "n > @n AND s = 'a&b<c' AND t = \"q\"\r\n", map[string]*raftbusv1.PropertyValue{"@n": i32(3), "@s": str("x")})
	sql.Action = &raftbusv1.SqlRuleAction{SqlExpression: "SET x = @s", Parameters: map[string]*raftbusv1.PropertyValue{"@s": str("y")}}
	corr := &raftbusv1.RuleProperties{Name: "c", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_CorrelationFilter{
		CorrelationFilter: &raftbusv1.CorrelationFilter{CorrelationId: "id", Subject: "s", ApplicationProperties: map[string]*raftbusv1.PropertyValue{
			"n": {Value: &raftbusv1.PropertyValue_IntValue{IntValue: 1 << 40}}, "u": {Value: &raftbusv1.PropertyValue_Uint8Value{Uint8Value: 7}},
			"f": {Value: &raftbusv1.PropertyValue_FloatValue{FloatValue: 0.5}}, "raw": {Value: &raftbusv1.PropertyValue_BytesValue{BytesValue: []byte{1, 2}}},
		}}}}}
	falseRule := &raftbusv1.RuleProperties{Name: "f", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}}}
	for _, r := range []*raftbusv1.RuleProperties{trueRule("a"), sql, corr, falseRule} {
		var w xmlWriter
		writeRule(&w, r, &description{})
		root, err := parseXML([]byte(w.String()))
		if err != nil {
			t.Fatal(err)
		}
		back, err := readRule(root, r.GetName())
		if err != nil || !proto.Equal(back, r) {
			t.Errorf("rule %s read back as %v (%v) from %s", r.GetName(), back, err, w.String())
		}
	}
}

func sec(n int) *durationpb.Duration { return durationpb.New(time.Duration(n) * time.Second) }

var unlimitedDuration = durationpb.New(unlimited)

func sqlRule(name, expr string, params map[string]*raftbusv1.PropertyValue) *raftbusv1.RuleProperties {
	return &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{
		SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr, Parameters: params}}}}
}

func trueRule(name string) *raftbusv1.RuleProperties {
	return &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}}}
}

func str(s string) *raftbusv1.PropertyValue {
	return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_StringValue{StringValue: s}}
}

func i32(n int32) *raftbusv1.PropertyValue {
	return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_Int32Value{Int32Value: n}}
}
