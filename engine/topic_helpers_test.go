package engine

import (
	"maps"
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const testTopic = "events"

func subPath(name string) string { return testTopic + subscriptionsSegment + name }

// newTopicHarness is a harness whose engine holds the topic testTopic.
func newTopicHarness(t testing.TB, props *raftbusv1.TopicProperties) *harness {
	t.Helper()
	h := &harness{t: t, e: New(0, 1), now: startMs, log: &fakeLog{entries: map[uint64][]byte{}}}
	h.ok(configureTopicCmd(props))
	return h
}

func configureTopicCmd(props *raftbusv1.TopicProperties) *enginev1.Command {
	if props == nil {
		props = &raftbusv1.TopicProperties{}
	}
	return &enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: testTopic, Topic: props,
	}}}
}

func subscribeCmd(name string, props *raftbusv1.SubscriptionProperties, rules ...*raftbusv1.RuleProperties) *enginev1.Command {
	if props == nil {
		props = &raftbusv1.SubscriptionProperties{}
	}
	return &enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: subPath(name), Subscription: props, Rules: rules,
	}}}
}

func (h *harness) subscribe(name string, props *raftbusv1.SubscriptionProperties, rules ...*raftbusv1.RuleProperties) {
	h.t.Helper()
	h.ok(subscribeCmd(name, props, rules...))
}

func deleteCmd(path string) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: path, Delete: true}}}
}

func sqlRule(name, expr string) *raftbusv1.RuleProperties {
	return &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{
		Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr}},
	}}
}

func withAction(r *raftbusv1.RuleProperties, action string) *raftbusv1.RuleProperties {
	r.Action = &raftbusv1.SqlRuleAction{SqlExpression: action}
	return r
}

func correlationRule(name string, f *raftbusv1.CorrelationFilter) *raftbusv1.RuleProperties {
	return &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{
		Filter: &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: f},
	}}
}

func addRuleCmd(sub string, r *raftbusv1.RuleProperties) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_AddRule{AddRule: &enginev1.AddRule{EntityPath: subPath(sub), Rule: r}}}
}

func removeRuleCmd(sub, name string) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_RemoveRule{RemoveRule: &enginev1.RemoveRule{EntityPath: subPath(sub), RuleName: name}}}
}

func publishCmd(msgs ...*raftbusv1.Message) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testTopic, Messages: msgs}}}
}

func (h *harness) publish(msgs ...*raftbusv1.Message) []*raftbusv1.SendResult {
	h.t.Helper()
	return h.ok(publishCmd(msgs...)).GetSend().GetMessages()
}

func lockOn(path string, sq raftbusv1.SubQueue, n int32) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{EntityPath: path, SubQueue: sq, ReceiveMode: peekLock, MaxMessages: n}}}
}

// lockSub locks up to n messages of a subscription's sub-queue.
func (h *harness) lockSub(sub string, sq raftbusv1.SubQueue, n int32) []*raftbusv1.ReceivedMessage {
	h.t.Helper()
	return h.ok(lockOn(subPath(sub), sq, n)).GetLock().GetMessages()
}

func settleOn(path string, sq raftbusv1.SubQueue, token []byte, d enginev1.Disposition) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Settle{Settle: &enginev1.Settle{EntityPath: path, SubQueue: sq, LockToken: token, Disposition: d}}}
}

func (h *harness) settleSub(sub string, m *raftbusv1.ReceivedMessage, d enginev1.Disposition) {
	h.t.Helper()
	h.ok(settleOn(subPath(sub), mainQueue, m.GetLockToken(), d))
}

// peekSub returns every message of a subscription's sub-queue.
func (h *harness) peekSub(sub string, sq raftbusv1.SubQueue) []*raftbusv1.ReceivedMessage {
	h.t.Helper()
	ms, err := h.e.Peek(subPath(sub), sq, 0, 1<<20, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	h.log.resolve(h.t, h.e.TakeBodies())
	return ms
}

func (h *harness) countsOf(path string) *raftbusv1.PartitionRuntimeProperties {
	h.t.Helper()
	p, err := h.e.RuntimeProperties(path)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func stringProp(s string) *raftbusv1.PropertyValue {
	return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_StringValue{StringValue: s}}
}

func intProp(i int64) *raftbusv1.PropertyValue {
	return &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_IntValue{IntValue: i}}
}

// checkTopicInvariants verifies that each topic's count of held bytes is
// what its subscriptions' copies hold, each shared body once, and that
// every subscription is listed by its topic.
func checkTopicInvariants(t testing.TB, e *Engine) {
	t.Helper()
	for _, ent := range e.sorted {
		if sub := ent.subscription; sub != nil {
			if e.entities[sub.topic.path] != sub.topic || !containsEntity(sub.topic.topic.subscriptions, ent) {
				t.Fatalf("subscription %q is not listed by its topic", ent.path)
			}
		}
		if ent.topic == nil {
			continue
		}
		var held int64
		copies := map[uint64]int32{}
		for _, s := range ent.topic.subscriptions {
			if e.entities[s.path] != s {
				t.Fatalf("topic %q lists a deleted subscription %q", ent.path, s.path)
			}
			for _, q := range [2]*queue{s.main, s.deadLetter} {
				q.all.ascend(0, func(m *message) bool {
					held += int64(len(m.id) + len(m.meta))
					if copies[m.origin()] == 0 {
						held += m.bodyLen()
					}
					copies[m.origin()]++
					return true
				})
			}
		}
		if !maps.Equal(copies, ent.topic.copies) {
			t.Fatalf("topic %q: copies by origin %v, recorded %v", ent.path, copies, ent.topic.copies)
		}
		if held != ent.topic.held {
			t.Fatalf("topic %q: holds %d bytes, recorded %d", ent.path, held, ent.topic.held)
		}
	}
}

func containsEntity(xs []*entity, x *entity) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
