package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/history"
)

// The entities a run starts with.
const (
	// WorkQueue: partitioned, duplicate detection, short locks and
	// MaxDeliveryCount, so that redelivery and dead-lettering happen; its
	// settings change during the run.
	WorkQueue = "work"
	// SessionQueue: requires sessions, duplicate detection.
	SessionQueue = "sessions"
	// PlainQueue: no duplicate detection, expired messages dead-lettered;
	// messages without MessageIds, some with a time to live, taken by
	// ReceiveAndDelete.
	PlainQueue = "plain"
	// Topic: duplicate detection; its subscriptions filter (see subs).
	Topic = "events"
	// ForwardQueue: partitioned, duplicate detection, forwards every
	// message to ForwardTarget (partitioned, no duplicate detection: only
	// the forwarding's own check keeps a message from arriving twice).
	ForwardQueue  = "forward"
	ForwardTarget = "forwarded"
)

// lockDuration is the lock of every entity a run starts with: short, so
// that faults outlast it.
const lockDuration = 2 * time.Second

var workSettings = history.Settings{DuplicateDetection: true, DuplicateWindow: int64(10 * time.Minute),
	LockDuration: int64(lockDuration), MaxDeliveryCount: 5}

// subscription is one subscription of Topic: the rules the broker gets
// and what they mean to the checker.
type subscription struct {
	name   string
	filter *history.Filter
	rules  []*admin.RuleProperties // the first is the default rule; nil: match all
	// ttl and deadLetter: its default time to live, and whether expired
	// messages go to its dead-letter sub-queue.
	ttl        time.Duration
	deadLetter bool
}

func cond(property string, values ...string) history.Condition {
	return history.Condition{Property: property, Values: values}
}

// subject is the property name the checker knows a message's Subject by.
const subject = "sys.Subject"

// subs are Topic's subscriptions at the start. Messages carry the
// properties color, size, region and a Subject (see Workload.ProduceTopic).
var subs = []subscription{
	{name: "all", filter: &history.Filter{Rules: []history.Rule{{}}}},
	{name: "red", filter: &history.Filter{Rules: []history.Rule{{cond("color", "red")}, {cond("color", "blue", "green"), cond("size", "big")}}}},
	{name: "audit", filter: &history.Filter{Rules: []history.Rule{{cond(subject, "audit"), cond("region", "eu")}}},
		rules: []*admin.RuleProperties{{Name: "$Default", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_CorrelationFilter{
			CorrelationFilter: &raftbusv1.CorrelationFilter{Subject: "audit", ApplicationProperties: map[string]*raftbusv1.PropertyValue{
				"region": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: "eu"}}}}}}}},
		ttl: 3 * time.Second},
	{name: "none", filter: &history.Filter{},
		rules: []*admin.RuleProperties{{Name: "$Default", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}}}}},
	// flip's rules change during the run (see ChangeEntities).
	{name: Flip, filter: &history.Filter{Rules: []history.Rule{{}}}, deadLetter: true},
}

// Flip is the subscription whose rules ChangeEntities adds and removes.
const Flip = "flip"

// sqlRules gives a subscription whose filter has no broker rules of its
// own one SQL rule per rule of its filter.
func (s *subscription) brokerRules() []*admin.RuleProperties {
	if s.rules != nil || (len(s.filter.Rules) == 1 && len(s.filter.Rules[0]) == 0) {
		return s.rules
	}
	var out []*admin.RuleProperties
	for i, r := range s.filter.Rules {
		name := "$Default"
		if i > 0 {
			name = fmt.Sprintf("r%d", i)
		}
		out = append(out, sqlRule(name, r))
	}
	return out
}

// sqlRule writes a rule of a filter as a SQL filter.
func sqlRule(name string, r history.Rule) *admin.RuleProperties {
	var terms []string
	for _, c := range r {
		quoted := make([]string, len(c.Values))
		for i, v := range c.Values {
			quoted[i] = "'" + v + "'"
		}
		terms = append(terms, fmt.Sprintf("%s IN (%s)", c.Property, strings.Join(quoted, ", ")))
	}
	expr := strings.Join(terms, " AND ")
	if expr == "" {
		expr = "1 = 1"
	}
	return &admin.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr}}}}
}

// entitySet is what exists for the drain and the digests: it changes as
// ChangeEntities creates and deletes.
type entitySet struct {
	mu     sync.Mutex
	queues []string
	subs   []string
}

func (s *entitySet) add(queue, sub string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if queue != "" {
		s.queues = append(s.queues, queue)
	}
	if sub != "" {
		s.subs = append(s.subs, sub)
	}
}

func (s *entitySet) remove(queue, sub string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues = slices.DeleteFunc(s.queues, func(q string) bool { return q == queue })
	s.subs = slices.DeleteFunc(s.subs, func(x string) bool { return x == sub })
}

func (s *entitySet) snapshot() (queues, subs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queues), slices.Clone(s.subs)
}

// Setup creates the entities a run starts with and records them.
func (w *Workload) Setup(ctx context.Context) error {
	queue := func(name string, s history.Settings, props *admin.QueueProperties) error {
		props.LockDuration = durationpb.New(time.Duration(s.LockDuration))
		if s.MaxDeliveryCount > 0 {
			props.MaxDeliveryCount = proto.Int32(s.MaxDeliveryCount)
		}
		props.RequiresDuplicateDetection = proto.Bool(s.DuplicateDetection)
		props.RequiresSession = proto.Bool(s.RequiresSession)
		props.DeadLetteringOnMessageExpiration = proto.Bool(s.DeadLetterOnExpiration)
		if s.DuplicateWindow > 0 {
			props.DuplicateDetectionHistoryTimeWindow = durationpb.New(time.Duration(s.DuplicateWindow))
		}
		props.ForwardTo = s.ForwardTo
		err := w.setup(ctx, name, s, func(ctx context.Context) error {
			_, err := w.Admin.CreateQueue(ctx, name, props)
			return err
		})
		w.entities.add(name, "")
		return err
	}
	sessions := workSettings
	sessions.RequiresSession = true
	plain := history.Settings{LockDuration: int64(lockDuration), MaxDeliveryCount: 10, DeadLetterOnExpiration: true}
	forward := workSettings
	forward.ForwardTo = ForwardTarget
	forwarded := history.Settings{LockDuration: int64(lockDuration), MaxDeliveryCount: 5}
	for _, err := range []error{
		queue(WorkQueue, workSettings, &admin.QueueProperties{PartitionCount: proto.Uint32(3)}),
		queue(SessionQueue, sessions, &admin.QueueProperties{PartitionCount: proto.Uint32(2)}),
		queue(PlainQueue, plain, &admin.QueueProperties{PartitionCount: proto.Uint32(2)}),
		queue(ForwardTarget, forwarded, &admin.QueueProperties{PartitionCount: proto.Uint32(2)}),
		queue(ForwardQueue, forward, &admin.QueueProperties{PartitionCount: proto.Uint32(2)}),
	} {
		if err != nil {
			return err
		}
	}
	topic := history.Settings{DuplicateDetection: true, DuplicateWindow: workSettings.DuplicateWindow}
	if err := w.setup(ctx, Topic, topic, func(ctx context.Context) error {
		_, err := w.Admin.CreateTopic(ctx, Topic, &admin.TopicProperties{PartitionCount: proto.Uint32(2),
			RequiresDuplicateDetection: proto.Bool(true), DuplicateDetectionHistoryTimeWindow: durationpb.New(time.Duration(topic.DuplicateWindow))})
		return err
	}); err != nil {
		return err
	}
	for _, s := range subs {
		if err := w.setup(ctx, subPath(s.name), s.settings(), func(ctx context.Context) error { return w.createSubscription(ctx, s) }); err != nil {
			return err
		}
		w.entities.add("", s.name)
	}
	return nil
}

func subPath(name string) string { return Topic + "/subscriptions/" + name }

func (s *subscription) settings() history.Settings {
	return history.Settings{Topic: Topic, Filter: s.filter, LockDuration: int64(lockDuration), MaxDeliveryCount: 10,
		DefaultTTL: int64(s.ttl), DeadLetterOnExpiration: s.deadLetter}
}

func (w *Workload) createSubscription(ctx context.Context, s subscription) error {
	props := &admin.SubscriptionProperties{LockDuration: durationpb.New(lockDuration), MaxDeliveryCount: proto.Int32(10),
		DeadLetteringOnMessageExpiration: proto.Bool(s.deadLetter)}
	if s.ttl > 0 {
		props.DefaultMessageTimeToLive = durationpb.New(s.ttl)
	}
	rules := s.brokerRules()
	var first *admin.RuleProperties
	if len(rules) > 0 {
		first = rules[0]
	}
	if _, err := w.Admin.CreateSubscription(ctx, Topic, s.name, props, first); err != nil && !alreadyExists(err) {
		return err
	}
	for _, r := range rules[min(1, len(rules)):] {
		if _, err := w.Admin.CreateRule(ctx, Topic, s.name, r); err != nil && !alreadyExists(err) {
			return err
		}
	}
	return nil
}

// setup creates one entity, riding out a cluster that is still electing,
// and records it as created before the run began.
func (w *Workload) setup(ctx context.Context, path string, s history.Settings, create func(ctx context.Context) error) error {
	start := w.History.Now()
	err := until(ctx, "create "+path, func(ctx context.Context) error {
		if err := create(ctx); err != nil && !alreadyExists(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.History.Record(history.Op{Kind: history.Change, Change: history.CreateEntity, Entity: path, Settings: &s,
		Start: start, End: w.History.Now(), Outcome: history.OK})
	return nil
}

func alreadyExists(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == client.CodeAlreadyExists
}
