package engine

import (
	"maps"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftbus/raftbus/engine/sqlfilter"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// publish gives a topic message (checked and encoded by send, its
// expiresMs still a time to live) its sequence number and enqueue time,
// and stores a copy in every subscription one of whose rules accepts it.
// The copies keep the topic's sequence number and enqueue time and share
// its body; the topic itself keeps nothing.
func (e *Engine) publish(topic *entity, m *message, src *raftbusv1.Message, now int64) {
	m.seq, m.order = e.sequence()
	m.enqueuedMs = now
	subs := topic.topic.subscriptions
	if len(subs) == 0 {
		return
	}
	v := &filterView{msg: src, seq: m.seq, enqueuedMs: now, ttlMs: m.expiresMs, size: m.size()}
	for _, sub := range subs {
		e.fanOut(sub, m, v, now)
	}
}

// publishScheduled publishes a scheduled topic message at its activation
// time t; the rules of that time decide where it goes.
func (e *Engine) publishScheduled(topic *entity, m *message, t int64) {
	src := &raftbusv1.Message{}
	if m.meta != nil {
		// meta was encoded by this package (or checked on restore).
		_ = proto.Unmarshal(m.meta, src)
	}
	src.MessageId = m.id
	e.publish(topic, m, src, t)
}

// fanOut stores the subscription's copy of m when one of its rules accepts
// it (and m has a session id if the subscription requires sessions; a send
// without one is refused while such a subscription exists). A filter or action that fails to evaluate sends the copy to the
// dead-letter sub-queue when the subscription says so; otherwise the
// failing rule does not match.
func (e *Engine) fanOut(subEnt *entity, m *message, v *filterView, now int64) {
	st := subEnt.subscription
	if subEnt.settings.requiresSession && v.msg.GetSessionId() == "" {
		// Scheduled before the subscription came: it cannot hold the copy.
		return
	}
	matched := false
	var evalErr error
	var buf [4]*sqlfilter.Action
	actions := buf[:0]
	for i := range st.rules {
		r := &st.rules[i]
		ok, err := r.filter.Match(v)
		if err != nil {
			if st.deadLetterOnFilterError {
				evalErr = err
				break
			}
			continue
		}
		if ok {
			matched = true
			if r.action != nil {
				actions = append(actions, r.action)
			}
		}
	}
	if !matched && evalErr == nil {
		return
	}
	c := &message{
		seq: m.seq, order: m.order, enqueuedMs: now, expiresMs: noExpiry,
		id: m.id, body: m.body, ref: m.ref, meta: m.meta, state: stateAvailable,
	}
	if ttl := min(v.ttlMs, subEnt.settings.defaultTTLMs); ttl != noExpiry {
		c.expiresMs = addMs(now, ttl)
	}
	if evalErr == nil && len(actions) > 0 {
		if err := applyActions(c, v, actions); err != nil {
			if !st.deadLetterOnFilterError {
				return
			}
			evalErr = err
			c.id, c.meta = m.id, m.meta
		}
	}
	if evalErr != nil {
		c.deadLetter = &deadLetterInfo{
			reason: reasonFilterEvaluation, description: descriptionFilterEvaluationError + evalErr.Error(),
			source: subEnt.path, enqueuedSeq: c.seq, origin: c.order,
		}
		if e.version < versionDeadLetterKeepsSequence {
			c.seq, c.order = e.sequence()
		}
		e.store(subEnt.deadLetter, c)
		return
	}
	if x := subEnt.main.sessions; x != nil {
		x.assign(c, v.msg.GetSessionId())
	}
	e.store(subEnt.main, c)
}

// applyActions runs the actions of the matching rules, in rule order, on
// the copy c, whose id and meta change with them.
func applyActions(c *message, v *filterView, actions []*sqlfilter.Action) error {
	src := v.msg
	msg := &raftbusv1.Message{
		MessageId: src.GetMessageId(), ContentType: src.GetContentType(), CorrelationId: src.GetCorrelationId(),
		Subject: src.GetSubject(), To: src.GetTo(), ReplyTo: src.GetReplyTo(), ReplyToSessionId: src.GetReplyToSessionId(),
		SessionId: src.GetSessionId(), PartitionKey: src.GetPartitionKey(), TimeToLive: src.GetTimeToLive(),
		ScheduledEnqueueTime: src.GetScheduledEnqueueTime(), ApplicationProperties: maps.Clone(src.GetApplicationProperties()),
	}
	mv := &mutableView{filterView: *v}
	mv.msg = msg
	for _, a := range actions {
		if err := a.Apply(mv); err != nil {
			return err
		}
	}
	if len(msg.MessageId) > maxMessageIDLength {
		return invalidf("sql action: message_id is longer than %d characters", maxMessageIDLength)
	}
	meta, err := encodeMeta(msg)
	if err != nil {
		return invalidf("sql action: %v", err)
	}
	c.id, c.meta = msg.MessageId, meta
	return nil
}

// filterView is what rule filters see of a topic message.
type filterView struct {
	msg        *raftbusv1.Message
	seq        int64
	enqueuedMs int64
	ttlMs      int64 // noExpiry: none
	size       int64
}

func (v *filterView) System(p sqlfilter.SystemProperty) (sqlfilter.Value, bool) {
	m := v.msg
	switch p {
	case sqlfilter.SysMessageID:
		return stringProperty(m.GetMessageId())
	case sqlfilter.SysCorrelationID:
		return stringProperty(m.GetCorrelationId())
	case sqlfilter.SysTo:
		return stringProperty(m.GetTo())
	case sqlfilter.SysReplyTo:
		return stringProperty(m.GetReplyTo())
	case sqlfilter.SysLabel:
		return stringProperty(m.GetSubject())
	case sqlfilter.SysSessionID:
		return stringProperty(m.GetSessionId())
	case sqlfilter.SysReplyToSessionID:
		return stringProperty(m.GetReplyToSessionId())
	case sqlfilter.SysContentType:
		return stringProperty(m.GetContentType())
	case sqlfilter.SysSequenceNumber:
		return sqlfilter.IntValue(v.seq), true
	case sqlfilter.SysEnqueuedTimeUtc:
		return timeValue(v.enqueuedMs), true
	case sqlfilter.SysScheduledEnqueueTimeUtc:
		if t := m.GetScheduledEnqueueTime(); t != nil {
			return sqlfilter.UnixTimeValue(t.GetSeconds(), t.GetNanos()), true
		}
	case sqlfilter.SysTimeToLive:
		if v.ttlMs != noExpiry {
			return sqlfilter.FloatValue(float64(v.ttlMs) / 1000), true
		}
	case sqlfilter.SysDeliveryCount:
		return sqlfilter.IntValue(0), true
	case sqlfilter.SysSize:
		return sqlfilter.IntValue(v.size), true
	}
	return sqlfilter.Value{}, false
}

func (v *filterView) User(name string) (sqlfilter.Value, bool) {
	pv, ok := v.msg.GetApplicationProperties()[name]
	if !ok {
		return sqlfilter.Value{}, false
	}
	return sqlfilter.ValueOf(pv), true
}

func stringProperty(s string) (sqlfilter.Value, bool) {
	return sqlfilter.StringValue(s), s != ""
}

func timeValue(ms int64) sqlfilter.Value {
	var t timestamppb.Timestamp
	setTimestamp(&t, ms)
	return sqlfilter.UnixTimeValue(t.Seconds, t.Nanos)
}

// mutableView is a filterView over a copy of the message that rule
// actions may change.
type mutableView struct {
	filterView
}

func (v *mutableView) SetUser(name string, val sqlfilter.Value) {
	if pv := propertyValue(val); pv != nil {
		if v.msg.ApplicationProperties == nil {
			v.msg.ApplicationProperties = make(map[string]*raftbusv1.PropertyValue)
		}
		v.msg.ApplicationProperties[name] = pv
	}
}

func (v *mutableView) RemoveUser(name string) { delete(v.msg.ApplicationProperties, name) }

func (v *mutableView) SetSystem(p sqlfilter.SystemProperty, val sqlfilter.Value) {
	s, _ := val.Str() // empty for null: the property is cleared
	m := v.msg
	switch p {
	case sqlfilter.SysMessageID:
		m.MessageId = s
	case sqlfilter.SysCorrelationID:
		m.CorrelationId = s
	case sqlfilter.SysTo:
		m.To = s
	case sqlfilter.SysReplyTo:
		m.ReplyTo = s
	case sqlfilter.SysLabel:
		m.Subject = s
	case sqlfilter.SysReplyToSessionID:
		m.ReplyToSessionId = s
	case sqlfilter.SysContentType:
		m.ContentType = s
	}
}

// propertyValue converts a non-null Value, keeping the type of the
// property it came from; nil for null.
func propertyValue(v sqlfilter.Value) *raftbusv1.PropertyValue {
	return v.PropertyValue()
}
