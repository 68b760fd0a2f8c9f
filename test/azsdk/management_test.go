package azsdk

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/client/admin"
)

// mgmt is a $management node client as the .NET, Java and JS SDKs use
// one: a sender to the node, a receiver from it whose target the
// requests name as reply-to, answers correlated by message-id.
type mgmt struct {
	t       *testing.T
	snd     *amqp.Sender
	rcv     *amqp.Receiver
	replyTo string
	next    uint64
}

func newMgmt(t *testing.T, b *broker, node string) *mgmt {
	t.Helper()
	ctx := testContext(t)
	conn, err := amqp.Dial(ctx, "amqp://"+b.cluster.Nodes[0].AMQPAddr, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &mgmt{t: t, replyTo: "reply-" + t.Name()}
	if m.snd, err = session.NewSender(ctx, node, nil); err != nil {
		t.Fatal(err)
	}
	if m.rcv, err = session.NewReceiver(ctx, node, &amqp.ReceiverOptions{TargetAddress: m.replyTo, Credit: 10}); err != nil {
		t.Fatal(err)
	}
	return m
}

// call sends one request and returns the answer's status code, its
// errorCondition and its body.
func (m *mgmt) call(op string, body map[string]any) (int32, string, any) {
	m.t.Helper()
	ctx := testContext(m.t)
	m.next++
	// A ulong message-id, as .NET's rule manager sends: the answer must
	// correlate with the same type.
	id := m.next
	req := &amqp.Message{
		Properties:            &amqp.MessageProperties{MessageID: id, ReplyTo: &m.replyTo},
		ApplicationProperties: map[string]any{"operation": op},
		Value:                 body,
	}
	if err := m.snd.Send(ctx, req, nil); err != nil {
		m.t.Fatalf("%s: %v", op, err)
	}
	resp, err := m.rcv.Receive(ctx, nil)
	if err != nil {
		m.t.Fatalf("%s: no answer: %v", op, err)
	}
	if resp.Properties == nil || resp.Properties.CorrelationID != id {
		m.t.Fatalf("%s: the answer correlates with %#v, not %#v", op, resp.Properties.CorrelationID, id)
	}
	code, _ := resp.ApplicationProperties["statusCode"].(int32)
	cond := fmt.Sprint(resp.ApplicationProperties["errorCondition"])
	if _, ok := resp.ApplicationProperties["errorCondition"]; !ok {
		cond = ""
	}
	if code >= 300 {
		m.t.Logf("%s: %d %v", op, code, resp.ApplicationProperties["statusDescription"])
	}
	return code, cond, resp.Value
}

// described reads a described value go-amqp decoded (its type is internal
// to go-amqp): the descriptor and the list.
func described(t *testing.T, v any) (uint64, []any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || !rv.FieldByName("Descriptor").IsValid() {
		t.Fatalf("%#v is not a described value", v)
	}
	code, _ := rv.FieldByName("Descriptor").Interface().(uint64)
	list, _ := rv.FieldByName("Value").Interface().([]any)
	return code, list
}

// TestRulesOverManagement: add-rule, enumerate-rules and remove-rule on a
// subscription's $management node, with the maps the .NET SDK's
// ServiceBusRuleManager sends and the described types it reads back.
func TestRulesOverManagement(t *testing.T) {
	b := startBroker(t)
	ctx := testContext(t)
	if _, err := b.admin.CreateTopic(ctx, "rules", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.CreateSubscription(ctx, "rules", "s", nil, nil); err != nil {
		t.Fatal(err)
	}
	m := newMgmt(t, b, "rules/Subscriptions/s/$management")

	add := func(name string, desc map[string]any) (int32, string) {
		desc["rule-name"] = name
		code, cond, _ := m.call("com.microsoft:add-rule", map[string]any{"rule-name": name, "rule-description": desc})
		return code, cond
	}
	if code, cond := add("eu", map[string]any{
		"sql-filter":      map[string]any{"expression": "region = 'eu'"},
		"sql-rule-action": map[string]any{"expression": "SET tagged = 'yes'"},
	}); code != 200 {
		t.Fatalf("add-rule sql: %d %s", code, cond)
	}
	if code, cond := add("red", map[string]any{
		"correlation-filter": map[string]any{"correlation-id": "c1", "label": "red", "properties": map[string]any{"size": int64(3)}},
	}); code != 200 {
		t.Fatalf("add-rule correlation: %d %s", code, cond)
	}
	if code, cond := add("eu", map[string]any{"sql-filter": map[string]any{"expression": "1=1"}}); code != 409 || cond != "com.microsoft:entity-already-exists" {
		t.Fatalf("a second add-rule eu: %d %s, want 409 entity-already-exists", code, cond)
	}
	if code, _ := add("bad", map[string]any{"sql-filter": map[string]any{"expression": "region = "}}); code != 400 {
		t.Fatalf("add-rule with a broken expression: %d, want 400", code)
	}

	// What the rules are now, through raftbus' own API.
	rules, err := b.admin.ListRules(ctx, "rules", "s")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*admin.RuleProperties{}
	for _, r := range rules {
		byName[r.GetName()] = r
	}
	if got := byName["eu"].GetFilter().GetSqlFilter().GetSqlExpression(); got != "region = 'eu'" {
		t.Fatalf("rule eu has filter %v", byName["eu"].GetFilter())
	}
	if got := byName["eu"].GetAction().GetSqlExpression(); got != "SET tagged = 'yes'" {
		t.Fatalf("rule eu has action %v", byName["eu"].GetAction())
	}
	cf := byName["red"].GetFilter().GetCorrelationFilter()
	if cf.GetCorrelationId() != "c1" || cf.GetSubject() != "red" || cf.GetApplicationProperties()["size"].GetIntValue() != 3 {
		t.Fatalf("rule red has filter %v", byName["red"].GetFilter())
	}

	// enumerate-rules: $Default, eu and red, a page at a time.
	seen := map[string]string{}
	for skip := int32(0); ; skip += 2 {
		code, _, body := m.call("com.microsoft:enumerate-rules", map[string]any{"top": int32(2), "skip": skip})
		if code == 204 {
			break
		}
		if code != 200 {
			t.Fatalf("enumerate-rules skip %d: %d", skip, code)
		}
		list, _ := body.(map[string]any)["rules"].([]any)
		if len(list) == 0 || len(list) > 2 {
			t.Fatalf("enumerate-rules skip %d: %d rules", skip, len(list))
		}
		for _, entry := range list {
			code, fields := described(t, entry.(map[string]any)["rule-description"])
			if code != 0x0000013700000004 || len(fields) != 4 {
				t.Fatalf("a rule-description %#x with %d fields", code, len(fields))
			}
			filterCode, filter := described(t, fields[0])
			actionCode, action := described(t, fields[1])
			seen[fields[2].(string)] = fmt.Sprintf("%#x %v / %#x %v", filterCode, filter, actionCode, action)
		}
	}
	want := map[string]string{
		"$Default": "0x1370000007 [] / 0x13700000005 []",
		"eu":       "0x1370000006 [region = 'eu' 20] / 0x13700000006 [SET tagged = 'yes' 20]",
		"red":      "0x1370000009 [c1 <nil> <nil> <nil> red <nil> <nil> <nil> map[size:3]] / 0x13700000005 []",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("enumerate-rules answered\n%v\nwant\n%v", seen, want)
	}

	if code, cond, _ := m.call("com.microsoft:remove-rule", map[string]any{"rule-name": "eu"}); code != 200 {
		t.Fatalf("remove-rule eu: %d %s", code, cond)
	}
	if code, cond, _ := m.call("com.microsoft:remove-rule", map[string]any{"rule-name": "eu"}); code != 404 || cond != "amqp:not-found" {
		t.Fatalf("remove-rule of a rule gone: %d %s, want 404 amqp:not-found", code, cond)
	}
	// On a queue's node, rules make no sense.
	b.queue(t, "norules")
	q := newMgmt(t, b, "norules/$management")
	if code, _, _ := q.call("com.microsoft:enumerate-rules", map[string]any{"top": int32(10), "skip": int32(0)}); code != 400 {
		t.Fatalf("enumerate-rules on a queue: %d, want 400", code)
	}
}

// TestManagementAnswersKeepTheRequestsIDAndFindTheirLink: each SDK names
// its requests differently (.NET a uuid, Java and JS strings, .NET's rule
// manager a ulong, some a binary id) and its reply link differently; the
// answer's correlation-id is the request's message-id with its AMQP type,
// and a request without a reply-to (uamqp's) is answered on the link that
// receives from the node.
func TestManagementAnswersKeepTheRequestsIDAndFindTheirLink(t *testing.T) {
	b := startBroker(t)
	q := b.queue(t, "ids")
	m := newMgmt(t, b, q+"/$management")
	ctx := testContext(t)
	peek := map[string]any{"from-sequence-number": int64(0), "message-count": int32(1)}
	for _, id := range []any{amqp.UUID{1, 2, 3}, uint64(77), []byte("binary-id"), "string-id"} {
		req := &amqp.Message{
			Properties:            &amqp.MessageProperties{MessageID: id, ReplyTo: &m.replyTo},
			ApplicationProperties: map[string]any{"operation": "com.microsoft:peek-message"},
			Value:                 peek,
		}
		if err := m.snd.Send(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		resp, err := m.rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Properties.CorrelationID; !reflect.DeepEqual(got, id) {
			t.Fatalf("message-id %#v (%T) answered with correlation-id %#v (%T)", id, id, got, got)
		}
		if code := resp.ApplicationProperties["statusCode"]; code != int32(204) {
			t.Fatalf("peek of an empty queue: status %v", code)
		}
	}
	// No reply-to: the answer comes on the receiver of the node.
	req := &amqp.Message{
		Properties:            &amqp.MessageProperties{MessageID: "no-reply-to"},
		ApplicationProperties: map[string]any{"operation": "com.microsoft:peek-message"},
		Value:                 peek,
	}
	if err := m.snd.Send(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := m.rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Properties.CorrelationID != "no-reply-to" {
		t.Fatalf("answered with correlation-id %#v", resp.Properties.CorrelationID)
	}
}
