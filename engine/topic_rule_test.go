package engine

import (
	"slices"
	"strings"
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestNewSubscriptionGetsTheDefaultTrueRule(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("s", nil)
	rules, err := h.e.Rules(subPath("s"))
	if err != nil || len(rules) != 1 || rules[0].GetName() != DefaultRuleName || rules[0].GetFilter().GetTrueFilter() == nil {
		t.Fatalf("rules %v %v", rules, err)
	}
	h.publish(&raftbusv1.Message{}, &raftbusv1.Message{Subject: "x"})
	if got := h.peekSub("s", mainQueue); len(got) != 2 {
		t.Fatalf("default rule let in %d of 2", len(got))
	}
	// A subscription created with rules has only those.
	h.subscribe("given", nil, sqlRule("x", "sys.Label = 'x'"))
	if rules := must(h.e.Rules(subPath("given"))); len(rules) != 1 || rules[0].GetName() != "x" {
		t.Fatalf("rules %v", rules)
	}
}

func TestMessageIsCopiedOnceWhenSeveralRulesMatch(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("s", nil, sqlRule("a", "n > 1"), sqlRule("b", "n > 2"), correlationRule("c", &raftbusv1.CorrelationFilter{Subject: "x"}))
	h.publish(&raftbusv1.Message{MessageId: "m", Subject: "x", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": intProp(5)}})
	h.publish(&raftbusv1.Message{MessageId: "none", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": intProp(0)}})
	if got := ids(h.peekSub("s", mainQueue)); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("subscription holds %v", got)
	}
}

func TestCorrelationFilterMatchesWhenEverySetFieldMatches(t *testing.T) {
	full := &raftbusv1.Message{
		CorrelationId: "c", MessageId: "m", To: "t", ReplyTo: "r", Subject: "s", SessionId: "sid",
		ReplyToSessionId: "rs", ContentType: "ct", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": stringProp("v"), "n": intProp(1)},
	}
	for name, tc := range map[string]struct {
		f    *raftbusv1.CorrelationFilter
		want bool
	}{
		"correlation id":      {&raftbusv1.CorrelationFilter{CorrelationId: "c"}, true},
		"message id":          {&raftbusv1.CorrelationFilter{MessageId: "m"}, true},
		"to":                  {&raftbusv1.CorrelationFilter{To: "t"}, true},
		"reply to":            {&raftbusv1.CorrelationFilter{ReplyTo: "r"}, true},
		"subject":             {&raftbusv1.CorrelationFilter{Subject: "s"}, true},
		"session id":          {&raftbusv1.CorrelationFilter{SessionId: "sid"}, true},
		"reply to session id": {&raftbusv1.CorrelationFilter{ReplyToSessionId: "rs"}, true},
		"content type":        {&raftbusv1.CorrelationFilter{ContentType: "ct"}, true},
		"properties":          {&raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": stringProp("v"), "n": intProp(1)}}, true},
		"all fields": {&raftbusv1.CorrelationFilter{CorrelationId: "c", MessageId: "m", To: "t", ReplyTo: "r", Subject: "s",
			SessionId: "sid", ReplyToSessionId: "rs", ContentType: "ct", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": stringProp("v")}}, true},
		"one field differs":    {&raftbusv1.CorrelationFilter{CorrelationId: "c", Subject: "other"}, false},
		"property differs":     {&raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": intProp(2)}}, false},
		"property kind":        {&raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"n": stringProp("1")}}, false},
		"property missing":     {&raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"absent": stringProp("v")}}, false},
		"case-sensitive value": {&raftbusv1.CorrelationFilter{Subject: "S"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			h := newTopicHarness(t, nil)
			h.subscribe("s", nil, correlationRule("r", tc.f))
			h.publish(full)
			if got := len(h.peekSub("s", mainQueue)) == 1; got != tc.want {
				t.Fatalf("matched %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSQLFilterSelectsBySystemAndApplicationProperties(t *testing.T) {
	msg := &raftbusv1.Message{
		MessageId: "order-17", Subject: "order.created", CorrelationId: "c1", To: "warehouse", ContentType: "application/json",
		SessionId: "s1", ReplyTo: "r", TimeToLive: dur(90_000_000_000), Body: []byte("12345"),
		ApplicationProperties: map[string]*raftbusv1.PropertyValue{"color": stringProp("red"), "quantity": intProp(12), "my prop": stringProp("x")},
	}
	for expr, want := range map[string]bool{
		"sys.Label = 'order.created'":                       true,
		"sys.Subject LIKE 'order.%'":                        true,
		"sys.MessageId LIKE 'order-1_'":                     true,
		"sys.MessageId LIKE 'order!_%' ESCAPE '!'":          false,
		"sys.CorrelationId = 'c1' AND sys.To = 'warehouse'": true,
		"sys.ContentType <> 'application/json'":             false,
		"sys.SessionId IN ('s0', 's1')":                     true,
		"sys.ReplyToSessionId IS NULL":                      true,
		"sys.TimeToLive > 60 AND sys.TimeToLive < 120":      true,
		"sys.SequenceNumber > 0 AND sys.DeliveryCount = 0":  true,
		"sys.Size > 5":                                true,
		"sys.ScheduledEnqueueTimeUtc IS NULL":         true,
		"color = 'red' AND quantity >= 10":            true,
		"color = 'red' AND NOT quantity > 10":         false,
		"quantity * 2 + 1 = 25":                       true,
		"quantity / 5 = 2 OR quantity % 5 = 3":        true,
		"missing = 1":                                 false,
		"missing IS NULL AND EXISTS(color)":           true,
		"NOT EXISTS(missing) AND [my prop] = 'x'":     true,
		"user.color IN ('blue', 'green')":             false,
		"(color = 'blue' OR quantity = 12) AND 1 = 1": true,
		"1 = 1": true,
		"1 = 0": false,
	} {
		t.Run(expr, func(t *testing.T) {
			h := newTopicHarness(t, nil)
			h.subscribe("s", nil, sqlRule("r", expr))
			h.publish(msg)
			if got := len(h.peekSub("s", mainQueue)) == 1; got != want {
				t.Fatalf("matched %v, want %v", got, want)
			}
		})
	}
}

func TestMalformedSQLIsRejectedWhenTheRuleIsCreated(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("s", nil)
	before := h.e.Digest()
	for name, cmd := range map[string]*enginev1.Command{
		"subscription": subscribeCmd("new", nil, sqlRule("bad", "color = 'red' AND")),
		"add rule":     addRuleCmd("s", sqlRule("bad", "color = 'red' AND")),
		"update":       subscribeCmd("s", nil, sqlRule("bad", "color = 'red' AND")),
	} {
		e := h.fails(cmd, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
		if !strings.Contains(e.GetMessage(), "position") || !strings.Contains(e.GetMessage(), "expected") {
			t.Errorf("%s: error without position and expectation: %q", name, e.GetMessage())
		}
	}
	for name, r := range map[string]*raftbusv1.RuleProperties{
		"action":      withAction(sqlRule("a", "1=1"), "SET = 1"),
		"no name":     sqlRule("", "1=1"),
		"long name":   sqlRule(strings.Repeat("n", MaxRuleNameLength+1), "1=1"),
		"correlation": correlationRule("c", &raftbusv1.CorrelationFilter{ApplicationProperties: map[string]*raftbusv1.PropertyValue{"k": {}}}),
		"bad utf-8":   correlationRule("c", &raftbusv1.CorrelationFilter{Subject: "\xff"}),
		"function":    sqlRule("f", "newid() = 'x'"),
	} {
		h.fails(addRuleCmd("s", r), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
		if err := ValidateRule(r); err == nil {
			t.Errorf("%s: ValidateRule accepted %v", name, r)
		}
	}
	h.fails(subscribeCmd("twice", nil, sqlRule("r", "1=1"), sqlRule("r", "2=2")), raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	if h.e.Digest() != before {
		t.Fatal("a refused rule changed the state")
	}
	if err := ValidateRule(withAction(sqlRule("ok", "a = 1"), "SET b = 2; REMOVE c")); err != nil {
		t.Fatalf("ValidateRule refused a good rule: %v", err)
	}
	if err := ValidateRules([]*raftbusv1.RuleProperties{sqlRule("r", "1=1"), sqlRule("r", "2=2")}); err == nil {
		t.Fatal("ValidateRules accepted a name twice")
	}
	if err := ValidateRules(nil); err != nil {
		t.Fatalf("ValidateRules refused the default rule set: %v", err)
	}
	// A filter that can fail only at evaluation is accepted when created.
	h.ok(addRuleCmd("s", sqlRule("typed", "color + 1 = 2")))
}

func TestRuleActionModifiesOnlyTheSubscriptionsCopy(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("plain", nil)
	h.subscribe("acted", nil, withAction(sqlRule("r", "1=1"), "SET sys.Label = 'relabelled'; SET doubled = quantity * 2; REMOVE secret; SET sys.MessageId = 'new-id'"))
	h.publish(&raftbusv1.Message{MessageId: "m", Subject: "s", Body: []byte("b"),
		ApplicationProperties: map[string]*raftbusv1.PropertyValue{"quantity": intProp(4), "secret": stringProp("x")}})
	acted := h.peekSub("acted", mainQueue)[0].GetMessage()
	if acted.GetSubject() != "relabelled" || acted.GetMessageId() != "new-id" || string(acted.GetBody()) != "b" ||
		acted.GetApplicationProperties()["doubled"].GetIntValue() != 8 || acted.GetApplicationProperties()["secret"] != nil {
		t.Fatalf("acted copy %v", acted)
	}
	plain := h.peekSub("plain", mainQueue)[0].GetMessage()
	if plain.GetSubject() != "s" || plain.GetMessageId() != "m" || plain.GetApplicationProperties()["secret"].GetStringValue() != "x" ||
		plain.GetApplicationProperties()["doubled"] != nil {
		t.Fatalf("plain copy changed: %v", plain)
	}
}

func TestAddingOrRemovingARuleAffectsOnlyLaterMessages(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("s", nil, sqlRule("red", "color = 'red'"))
	send := func(id, color string) {
		h.publish(&raftbusv1.Message{MessageId: id, ApplicationProperties: map[string]*raftbusv1.PropertyValue{"color": stringProp(color)}})
	}
	send("r1", "red")
	send("b1", "blue")
	h.ok(addRuleCmd("s", sqlRule("blue", "color = 'blue'")))
	h.fails(addRuleCmd("s", sqlRule("blue", "1=1")), raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS)
	send("b2", "blue")
	h.ok(removeRuleCmd("s", "red"))
	h.fails(removeRuleCmd("s", "red"), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	send("r2", "red")
	send("b3", "blue")
	if got := ids(h.peekSub("s", mainQueue)); !slices.Equal(got, []string{"r1", "b2", "b3"}) {
		t.Fatalf("subscription holds %v", got)
	}
	h.ok(removeRuleCmd("s", "blue"))
	send("b4", "blue")
	if got := len(h.peekSub("s", mainQueue)); got != 3 {
		t.Fatalf("a subscription without rules took a message: %d", got)
	}
	h.fails(addRuleCmd("nope", sqlRule("x", "1=1")), raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	h.fails(&enginev1.Command{Body: &enginev1.Command_AddRule{AddRule: &enginev1.AddRule{EntityPath: testTopic, Rule: sqlRule("x", "1=1")}}},
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	// Updating a subscription's settings without rules keeps its rules.
	h.subscribe("s", &raftbusv1.SubscriptionProperties{MaxDeliveryCount: ptr[int32](2)})
	if rules := must(h.e.Rules(subPath("s"))); len(rules) != 0 {
		t.Fatalf("an update without rules changed them: %v", rules)
	}
	h.subscribe("s", nil, sqlRule("all", "1=1"))
	send("r3", "red")
	if got := len(h.peekSub("s", mainQueue)); got != 4 {
		t.Fatalf("replaced rules not applied: %d", got)
	}
}

func TestFilterEvaluationErrorDeadLettersTheCopy(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.subscribe("strict", nil, sqlRule("typed", "quantity > 10"))
	h.subscribe("lenient", &raftbusv1.SubscriptionProperties{DeadLetteringOnFilterEvaluationExceptions: ptr(false)},
		sqlRule("typed", "quantity > 10"), sqlRule("fallback", "EXISTS(quantity)"))
	h.subscribe("acting", nil, withAction(sqlRule("r", "1=1"), "SET n = quantity + 1"))
	sent := h.publish(&raftbusv1.Message{MessageId: "text", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"quantity": stringProp("many")}})
	dl := h.peekSub("strict", deadLetter)
	if len(dl) != 1 || dl[0].GetDeadLetterReason() != reasonFilterEvaluation || !strings.Contains(dl[0].GetDeadLetterErrorDescription(), "position") ||
		dl[0].GetSequenceNumber() != sent[0].GetSequenceNumber() || dl[0].GetEnqueuedSequenceNumber() != sent[0].GetSequenceNumber() ||
		dl[0].GetDeadLetterSource() != subPath("strict") {
		t.Fatalf("strict subscription dead-lettered %v", dl)
	}
	if len(h.peekSub("strict", mainQueue)) != 0 {
		t.Fatal("strict subscription also kept the copy")
	}
	// Without dead-lettering the failing rule does not match; others still may.
	if got := ids(h.peekSub("lenient", mainQueue)); !slices.Equal(got, []string{"text"}) || len(h.peekSub("lenient", deadLetter)) != 0 {
		t.Fatalf("lenient subscription holds %v", got)
	}
	if dl := h.peekSub("acting", deadLetter); len(dl) != 1 || dl[0].GetMessage().GetApplicationProperties()["n"] != nil {
		t.Fatalf("a failing action dead-lettered %v", dl)
	}
	// Well-typed messages go through.
	h.publish(&raftbusv1.Message{MessageId: "number", ApplicationProperties: map[string]*raftbusv1.PropertyValue{"quantity": intProp(11)}})
	if got := ids(h.peekSub("strict", mainQueue)); !slices.Equal(got, []string{"number"}) {
		t.Fatalf("strict subscription holds %v", got)
	}
}
