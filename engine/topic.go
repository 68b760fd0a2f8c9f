package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/engine/sqlfilter"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	// subscriptionsSegment separates a topic's path from a subscription's
	// name: "events/subscriptions/audit".
	subscriptionsSegment = "/subscriptions/"
	// DefaultRuleName is the rule a subscription gets when it is created
	// without rules: a true filter.
	DefaultRuleName = "$Default"
	// MaxRuleNameLength is the longest rule name, as in Service Bus.
	MaxRuleNameLength                = 50
	reasonFilterEvaluation           = "FilterEvaluationException"
	descriptionFilterEvaluationError = "A rule of the subscription failed to evaluate: "
)

// NormalizeTopicProperties returns a copy of p with every unset setting at
// its default, or an INVALID_ARGUMENT error naming the first setting out of
// range. The name and metadata fields are copied as they are.
func NormalizeTopicProperties(p *raftbusv1.TopicProperties) (*raftbusv1.TopicProperties, error) {
	return normalizeTopicProperties(p, MaxMaxMessageSizeInKilobytes)
}

// normalizeTopicProperties is NormalizeTopicProperties with maxMessageKB
// as the limit of max_message_size_in_kilobytes.
func normalizeTopicProperties(p *raftbusv1.TopicProperties, maxMessageKB int64) (*raftbusv1.TopicProperties, error) {
	if p == nil {
		p = &raftbusv1.TopicProperties{}
	}
	// The settings a topic shares with a queue have the same defaults and
	// limits; normalizing them as a queue keeps the two in step.
	q, err := normalizeQueueProperties(&raftbusv1.QueueProperties{
		DefaultMessageTimeToLive:            p.GetDefaultMessageTimeToLive(),
		RequiresDuplicateDetection:          p.RequiresDuplicateDetection,
		DuplicateDetectionHistoryTimeWindow: p.GetDuplicateDetectionHistoryTimeWindow(),
		MaxSizeInMegabytes:                  p.MaxSizeInMegabytes,
		MaxMessageSizeInKilobytes:           p.MaxMessageSizeInKilobytes,
		EnableBatchedOperations:             p.EnableBatchedOperations,
		PartitionCount:                      p.PartitionCount,
		AutoDeleteOnIdle:                    p.GetAutoDeleteOnIdle(),
	}, maxMessageKB)
	if err != nil {
		return nil, err
	}
	n := proto.Clone(p).(*raftbusv1.TopicProperties)
	n.DefaultMessageTimeToLive = q.DefaultMessageTimeToLive
	n.RequiresDuplicateDetection = q.RequiresDuplicateDetection
	n.DuplicateDetectionHistoryTimeWindow = q.DuplicateDetectionHistoryTimeWindow
	n.MaxSizeInMegabytes = q.MaxSizeInMegabytes
	n.MaxMessageSizeInKilobytes = q.MaxMessageSizeInKilobytes
	n.EnableBatchedOperations = q.EnableBatchedOperations
	n.PartitionCount = q.PartitionCount
	n.AutoDeleteOnIdle = q.AutoDeleteOnIdle
	if n.SupportOrdering == nil {
		n.SupportOrdering = proto.Bool(true)
	}
	return n, nil
}

// NormalizeSubscriptionProperties returns a copy of p with every unset
// setting at its default, or an INVALID_ARGUMENT error naming the first
// setting out of range. Names and metadata fields are copied as they are.
func NormalizeSubscriptionProperties(p *raftbusv1.SubscriptionProperties) (*raftbusv1.SubscriptionProperties, error) {
	if p == nil {
		p = &raftbusv1.SubscriptionProperties{}
	}
	q, err := NormalizeQueueProperties(&raftbusv1.QueueProperties{
		LockDuration:                     p.GetLockDuration(),
		MaxDeliveryCount:                 p.MaxDeliveryCount,
		RequiresSession:                  p.RequiresSession,
		DefaultMessageTimeToLive:         p.GetDefaultMessageTimeToLive(),
		DeadLetteringOnMessageExpiration: p.DeadLetteringOnMessageExpiration,
		EnableBatchedOperations:          p.EnableBatchedOperations,
		AutoDeleteOnIdle:                 p.GetAutoDeleteOnIdle(),
	})
	if err != nil {
		return nil, err
	}
	n := proto.Clone(p).(*raftbusv1.SubscriptionProperties)
	n.AutoDeleteOnIdle = q.AutoDeleteOnIdle
	n.LockDuration = q.LockDuration
	n.MaxDeliveryCount = q.MaxDeliveryCount
	n.RequiresSession = q.RequiresSession
	n.DefaultMessageTimeToLive = q.DefaultMessageTimeToLive
	n.DeadLetteringOnMessageExpiration = q.DeadLetteringOnMessageExpiration
	n.EnableBatchedOperations = q.EnableBatchedOperations
	if n.DeadLetteringOnFilterEvaluationExceptions == nil {
		n.DeadLetteringOnFilterEvaluationExceptions = proto.Bool(true)
	}
	for _, f := range [...]struct{ name, value string }{
		{"topic_name", n.GetTopicName()}, {"subscription_name", n.GetSubscriptionName()},
		{"forward_to", n.GetForwardTo()}, {"forward_dead_lettered_messages_to", n.GetForwardDeadLetteredMessagesTo()},
	} {
		if err := checkText(f.name, f.value); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// ValidateRule checks a rule as it would be created: a name, and a filter
// and action that parse. A malformed SQL expression is an INVALID_ARGUMENT
// error that names the position and what was expected there.
func ValidateRule(r *raftbusv1.RuleProperties) error {
	if _, err := compileRule(r); err != nil {
		return err
	}
	return nil
}

// ValidateRules checks a subscription's rule set as it would be created
// or replaced: every rule valid, no name twice. An empty set is valid (the
// subscription gets the $Default rule).
func ValidateRules(rs []*raftbusv1.RuleProperties) error {
	if _, err := compileRules(rs); err != nil {
		return err
	}
	return nil
}

// rule is one compiled rule of a subscription.
type rule struct {
	properties *raftbusv1.RuleProperties
	filter     sqlfilter.Matcher
	action     *sqlfilter.Action // nil: none
}

func compileRule(r *raftbusv1.RuleProperties) (rule, *Error) {
	name := r.GetName()
	switch {
	case r == nil:
		return rule{}, invalidf("rule is missing")
	case name == "":
		return rule{}, invalidf("rule name is empty")
	case !utf8.ValidString(name):
		return rule{}, invalidf("rule name is not valid UTF-8")
	case utf8.RuneCountInString(name) > MaxRuleNameLength:
		return rule{}, invalidf("rule name %q is longer than %d characters", name, MaxRuleNameLength)
	}
	if _, err := proto.Marshal(r); err != nil {
		// Stored rules go into snapshots, whose strings must be UTF-8.
		return rule{}, invalidf("rule %q: %v", name, err)
	}
	filter, err := sqlfilter.CompileRuleFilter(r.GetFilter())
	if err != nil {
		return rule{}, invalidf("rule %q: filter: %v", name, err)
	}
	c := rule{properties: proto.Clone(r).(*raftbusv1.RuleProperties), filter: filter}
	if a := r.GetAction(); a.GetSqlExpression() != "" {
		if c.action, err = sqlfilter.ParseSQLRuleAction(a); err != nil {
			return rule{}, invalidf("rule %q: action: %v", name, err)
		}
	}
	return c, nil
}

// compileRules compiles a subscription's rule set, sorted by name (the
// order their actions apply in); no rules at all is the $Default rule.
func compileRules(rs []*raftbusv1.RuleProperties) ([]rule, *Error) {
	if len(rs) == 0 {
		rs = []*raftbusv1.RuleProperties{{Name: DefaultRuleName, Filter: &raftbusv1.RuleFilter{
			Filter: &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}},
		}}}
	}
	out := make([]rule, 0, len(rs))
	for _, r := range rs {
		c, err := compileRule(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b rule) int { return strings.Compare(a.properties.GetName(), b.properties.GetName()) })
	for i := 1; i < len(out); i++ {
		if out[i].properties.GetName() == out[i-1].properties.GetName() {
			return nil, invalidf("rule %q is given twice", out[i].properties.GetName())
		}
	}
	return out, nil
}

// topicState is what a topic entity has besides a queue: its main queue
// holds only scheduled messages, which are fanned out when they activate.
type topicState struct {
	subscriptions []*entity // by path
	// held is the bytes the copies in the subscriptions hold in this
	// partition, each shared body counted once.
	held int64
	// copies counts the stored copies of each topic message, by its order,
	// so that its body's bytes leave held with the last of them.
	copies map[uint64]int32
}

// subscriptionState is what a subscription entity has besides a queue.
type subscriptionState struct {
	topic                   *entity
	rules                   []rule // by name
	deadLetterOnFilterError bool
}

// splitSubscriptionPath splits "<topic>/subscriptions/<name>"; ok is false
// for any other path.
func splitSubscriptionPath(path string) (topic, name string, ok bool) {
	i := strings.LastIndex(path, subscriptionsSegment)
	if i <= 0 {
		return "", "", false
	}
	topic, name = path[:i], path[i+len(subscriptionsSegment):]
	return topic, name, name != "" && !strings.Contains(name, "/")
}

// pubSubSettings are the settings of a topic or a subscription in the form
// the engine uses them.
func pubSubSettings(c *enginev1.ConfigureEntity) (settings, *Error) {
	if c.GetTopic() != nil && c.GetSubscription() != nil {
		return settings{}, invalidf("an entity is a topic or a subscription, not both")
	}
	if c.GetTopic() != nil {
		p, err := normalizeTopicProperties(c.GetTopic(), legacyMaxMessageSizeInKilobytes)
		if err != nil {
			return settings{}, err.(*Error)
		}
		s, serr := newSettings(&enginev1.ConfigureEntity{MaxSizeBytes: c.GetMaxSizeBytes(), Properties: &raftbusv1.QueueProperties{
			DefaultMessageTimeToLive: p.DefaultMessageTimeToLive, RequiresDuplicateDetection: p.RequiresDuplicateDetection,
			DuplicateDetectionHistoryTimeWindow: p.DuplicateDetectionHistoryTimeWindow, MaxSizeInMegabytes: p.MaxSizeInMegabytes,
			MaxMessageSizeInKilobytes: p.MaxMessageSizeInKilobytes,
		}})
		s.normalizedProperties, s.topicProperties = nil, p
		return s, serr
	}
	p, err := NormalizeSubscriptionProperties(c.GetSubscription())
	if err != nil {
		return settings{}, err.(*Error)
	}
	s, serr := newSettings(&enginev1.ConfigureEntity{Properties: &raftbusv1.QueueProperties{
		LockDuration: p.LockDuration, MaxDeliveryCount: p.MaxDeliveryCount, RequiresSession: p.RequiresSession,
		DefaultMessageTimeToLive: p.DefaultMessageTimeToLive, DeadLetteringOnMessageExpiration: p.DeadLetteringOnMessageExpiration,
	}})
	// The topic's limits apply to what is sent; a copy is never refused.
	s.maxSizeBytes, s.maxMessageSizeBytes = math.MaxInt64, math.MaxInt64
	s.normalizedProperties, s.subscriptionProperties, s.configuredMaxSizeByte = nil, p, 0
	s.forwardTo, s.forwardDLQ = p.GetForwardTo(), p.GetForwardDeadLetteredMessagesTo()
	return s, serr
}

// kindName names an entity's kind in errors.
func (ent *entity) kindName() string {
	switch {
	case ent.topic != nil:
		return "topic"
	case ent.subscription != nil:
		return "subscription"
	}
	return "queue"
}

// configureKind checks that c may configure ent (nil: a new entity) and
// compiles the rules it sets. It changes nothing.
func (e *Engine) configureKind(ent *entity, c *enginev1.ConfigureEntity) (topic *entity, rules []rule, err *Error) {
	path := c.GetEntityPath()
	_, _, isSubPath := splitSubscriptionPath(path)
	wantKind := "queue"
	switch {
	case c.GetTopic() != nil:
		wantKind = "topic"
	case c.GetSubscription() != nil:
		wantKind = "subscription"
	}
	if ent != nil && ent.kindName() != wantKind {
		return nil, nil, invalidf("entity %q is a %s, not a %s", path, ent.kindName(), wantKind)
	}
	if isSubPath != (wantKind == "subscription") {
		return nil, nil, invalidf("%q: only a subscription's path has the form <topic>%s<name>", path, subscriptionsSegment)
	}
	if len(c.GetRules()) > 0 && wantKind != "subscription" {
		return nil, nil, invalidf("%q: only a subscription has rules", path)
	}
	if wantKind != "subscription" {
		return nil, nil, nil
	}
	if ent == nil || len(c.GetRules()) > 0 {
		if rules, err = compileRules(c.GetRules()); err != nil {
			return nil, nil, err
		}
	}
	if ent != nil {
		return ent.subscription.topic, rules, nil
	}
	topicPath, _, _ := splitSubscriptionPath(path)
	topic = e.entities[topicPath]
	if topic == nil || topic.topic == nil {
		return nil, nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "topic %q of subscription %q does not exist in this partition", topicPath, path)
	}
	return topic, rules, nil
}

// attachKind makes a new entity a topic or a subscription as c says.
func (e *Engine) attachKind(ent *entity, c *enginev1.ConfigureEntity, topic *entity, rules []rule) {
	switch {
	case c.GetTopic() != nil:
		ent.topic = &topicState{copies: make(map[uint64]int32)}
	case c.GetSubscription() != nil:
		ent.subscription = &subscriptionState{topic: topic, rules: rules}
		subs := topic.topic.subscriptions
		i, _ := slices.BinarySearchFunc(subs, ent.path, func(x *entity, p string) int { return strings.Compare(x.path, p) })
		topic.topic.subscriptions = slices.Insert(subs, i, ent)
	}
	e.reconfigureKind(ent, rules)
}

// reconfigureKind applies the settings that live outside settings.
func (e *Engine) reconfigureKind(ent *entity, rules []rule) {
	if sub := ent.subscription; sub != nil {
		sub.deadLetterOnFilterError = ent.settings.subscriptionProperties.GetDeadLetteringOnFilterEvaluationExceptions()
		if rules != nil {
			sub.rules = rules
		}
	}
}

// deleteEntity removes an entity, and a topic's subscriptions with it.
func (e *Engine) deleteEntity(path string) {
	ent, ok := e.entities[path]
	if !ok {
		return
	}
	gone := []*entity{ent}
	if ent.topic != nil {
		gone = append(gone, ent.topic.subscriptions...)
	}
	if sub := ent.subscription; sub != nil {
		t := sub.topic.topic
		t.subscriptions = slices.DeleteFunc(t.subscriptions, func(x *entity) bool { return x == ent })
		// What only this subscription held leaves the topic's count.
		for _, q := range [2]*queue{ent.main, ent.deadLetter} {
			q.all.ascend(0, func(m *message) bool {
				t.unshare(m)
				return true
			})
		}
	}
	for _, g := range gone {
		delete(e.entities, g.path)
		// Its messages' bodies are no longer needed in the log.
		for _, q := range [2]*queue{g.main, g.deadLetter} {
			q.all.ascend(0, func(m *message) bool {
				e.pins.remove(m.ref)
				return true
			})
		}
	}
	e.dropTransfers(gone)
	e.sorted = slices.DeleteFunc(e.sorted, func(x *entity) bool { return slices.Contains(gone, x) })
}

// origin is the order of the topic message m, stored in a subscription,
// is a copy of. A copy keeps it unless it was dead-lettered.
func (m *message) origin() uint64 {
	if m.deadLetter != nil {
		return m.deadLetter.origin
	}
	return m.order
}

// share counts a copy of a topic message stored in a subscription.
func (t *topicState) share(m *message) {
	t.held += int64(len(m.id) + len(m.meta))
	o := m.origin()
	n := t.copies[o]
	if n == 0 {
		t.held += m.bodyLen()
	}
	t.copies[o] = n + 1
}

// unshare counts a copy gone.
func (t *topicState) unshare(m *message) {
	t.held -= int64(len(m.id) + len(m.meta))
	o := m.origin()
	if n := t.copies[o] - 1; n > 0 {
		t.copies[o] = n
		return
	}
	delete(t.copies, o)
	t.held -= m.bodyLen()
}

// topicOf is the topic whose copies q holds, or nil.
func (q *queue) topicOf() *topicState {
	if sub := q.entity.subscription; sub != nil {
		return sub.topic.topic
	}
	return nil
}

// subscriptionRequiresSession reports whether one of a topic's
// subscriptions requires sessions: then every message sent to the topic
// needs a session id, as in Service Bus.
func (ent *entity) subscriptionRequiresSession() bool {
	if ent.topic == nil {
		return false
	}
	for _, s := range ent.topic.subscriptions {
		if s.settings.requiresSession {
			return true
		}
	}
	return false
}

// configuration is the ConfigureEntity that reproduces the entity.
func (ent *entity) configuration() *enginev1.ConfigureEntity {
	c := ent.settings.configuration(ent.path)
	if sub := ent.subscription; sub != nil {
		c.Rules = make([]*raftbusv1.RuleProperties, len(sub.rules))
		for i, r := range sub.rules {
			c.Rules[i] = r.properties
		}
	}
	return c
}

func (e *Engine) subscriptionOf(path string) (*entity, *Error) {
	ent, err := e.entity(path)
	if err != nil {
		return nil, err
	}
	if ent.subscription == nil {
		return nil, invalidf("entity %q is a %s: only a subscription has rules", path, ent.kindName())
	}
	return ent, nil
}

// addRule adds a rule; messages sent before it are not looked at again.
func (e *Engine) addRule(c *enginev1.AddRule) *Error {
	ent, err := e.subscriptionOf(c.GetEntityPath())
	if err != nil {
		return err
	}
	r, err := compileRule(c.GetRule())
	if err != nil {
		return err
	}
	rules := ent.subscription.rules
	i, found := slices.BinarySearchFunc(rules, r.properties.GetName(), func(x rule, name string) int { return strings.Compare(x.properties.GetName(), name) })
	if found {
		return errorf(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "subscription %q already has a rule %q", ent.path, r.properties.GetName())
	}
	ent.subscription.rules = slices.Insert(slices.Clip(rules), i, r)
	return nil
}

// removeRule removes a rule; the copies it let in stay.
func (e *Engine) removeRule(c *enginev1.RemoveRule) *Error {
	ent, err := e.subscriptionOf(c.GetEntityPath())
	if err != nil {
		return err
	}
	rules := ent.subscription.rules
	i, found := slices.BinarySearchFunc(rules, c.GetRuleName(), func(x rule, name string) int { return strings.Compare(x.properties.GetName(), name) })
	if !found {
		return errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "subscription %q has no rule %q", ent.path, c.GetRuleName())
	}
	ent.subscription.rules = slices.Delete(slices.Clone(rules), i, i+1)
	return nil
}

// Subscriptions returns the paths of a topic's subscriptions in this
// partition, in order; their number is the topic's subscription count.
func (e *Engine) Subscriptions(topicPath string) ([]string, error) {
	ent, err := e.entity(topicPath)
	if err != nil {
		return nil, err
	}
	if ent.topic == nil {
		return nil, invalidf("entity %q is a %s, not a topic", topicPath, ent.kindName())
	}
	out := make([]string, len(ent.topic.subscriptions))
	for i, s := range ent.topic.subscriptions {
		out[i] = s.path
	}
	return out, nil
}

// Rules returns a subscription's rules, by name.
func (e *Engine) Rules(subscriptionPath string) ([]*raftbusv1.RuleProperties, error) {
	ent, err := e.subscriptionOf(subscriptionPath)
	if err != nil {
		return nil, err
	}
	out := make([]*raftbusv1.RuleProperties, len(ent.subscription.rules))
	for i, r := range ent.subscription.rules {
		out[i] = proto.Clone(r.properties).(*raftbusv1.RuleProperties)
	}
	return out, nil
}

// sharedBodies are the first copies of topic messages a snapshot has
// written or a restore has read, by origin: the later copies share their
// bodies.
type sharedBodies map[uint64]*message

// stored marks s, a copy of a topic message, with its origin; only the
// first copy of a topic message carries its body.
func (b sharedBodies) stored(s *enginev1.StoredMessage, ent *entity, m *message) *enginev1.StoredMessage {
	if ent.subscription == nil {
		return s
	}
	s.OriginOrder = m.origin()
	if _, ok := b[s.OriginOrder]; ok {
		s.Body, s.BodyRef = nil, nil
	} else {
		b[s.OriginOrder] = m
	}
	return s
}

// restore gives m, read into ent, its origin and its share of a body.
func (b sharedBodies) restore(ent *entity, m *message, origin uint64) error {
	if ent.subscription == nil {
		if origin != 0 {
			return errors.New("an origin outside a subscription")
		}
		return nil
	}
	if origin == 0 || origin > m.order {
		return fmt.Errorf("a copy with origin %d after its order %d", origin, m.order)
	}
	if m.deadLetter != nil {
		m.deadLetter.origin = origin
	} else if origin != m.order {
		return fmt.Errorf("a copy with origin %d has order %d", origin, m.order)
	}
	first, ok := b[origin]
	if !ok {
		b[origin] = m
		return nil
	}
	if len(m.body) != 0 || m.ref.onDisk() {
		return fmt.Errorf("the body of topic message %d written twice", origin)
	}
	m.body, m.ref = first.body, first.ref
	return nil
}
