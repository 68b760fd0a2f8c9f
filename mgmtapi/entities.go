package mgmtapi

import (
	"fmt"
	"net/http"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The operations: each turns a request into calls of the admin service
// (the same calls its gRPC clients make) and their results into an
// answer. A PUT without If-Match creates (409 when the entity exists);
// with If-Match: * it updates (404 when it does not), the elements the
// description has replacing the settings, the others keeping theirs.

// defaultRuleName is the rule a subscription is created with.
const defaultRuleName = "$Default"

func isNotFound(err error) bool {
	return err != nil && apierror.From(err).Reason == raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND
}

func entityNotFound(name string) error {
	return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("The messaging entity '%s' could not be found", name)}
}

// updating reports whether a PUT updates (If-Match) or creates.
func (rq *request) updating() bool { return rq.r.Header.Get("If-Match") != "" }

// entity serves /{name}, a queue or a topic: the kind a GET or DELETE
// finds, the kind a PUT's description says.
func (rq *request) entity(name string) error {
	admin := rq.h.cfg.Admin
	switch rq.r.Method {
	case http.MethodGet:
		q, err := admin.GetQueue(rq.ctx, &raftbusv1.GetQueueRequest{Name: name})
		if err == nil {
			return rq.answerQueue(http.StatusOK, q.GetQueue(), true)
		}
		if !isNotFound(err) {
			return err
		}
		t, err := admin.GetTopic(rq.ctx, &raftbusv1.GetTopicRequest{Name: name})
		if err == nil {
			return rq.answerTopic(http.StatusOK, t.GetTopic(), true)
		}
		if isNotFound(err) {
			return entityNotFound(name)
		}
		return err
	case http.MethodDelete:
		_, err := admin.DeleteQueue(rq.ctx, &raftbusv1.DeleteQueueRequest{Name: name})
		if isNotFound(err) {
			_, err = admin.DeleteTopic(rq.ctx, &raftbusv1.DeleteTopicRequest{Name: name})
			if isNotFound(err) {
				return entityNotFound(name)
			}
		}
		if err != nil {
			return err
		}
		rq.answer(http.StatusOK, "application/xml; charset=utf-8", "")
		return nil
	}
	desc, err := rq.readEntry()
	if err != nil {
		return err
	}
	switch desc.name.Local {
	case "QueueDescription":
		return rq.putQueue(name, desc)
	case "TopicDescription":
		return rq.putTopic(name, desc)
	}
	return badRequest("PUT /%s takes a QueueDescription or a TopicDescription, not a %s", name, desc.name.Local)
}

func (rq *request) putQueue(name string, desc *element) error {
	q := &raftbusv1.QueueProperties{}
	if err := readProperties(queueProperties, desc, q.ProtoReflect()); err != nil {
		return badRequest("QueueDescription: %v", err)
	}
	q.Name = name
	admin := rq.h.cfg.Admin
	if !rq.updating() {
		resp, err := admin.CreateQueue(rq.ctx, &raftbusv1.CreateQueueRequest{Queue: q})
		if err != nil {
			return err
		}
		return rq.answerQueue(http.StatusCreated, resp.GetQueue(), false)
	}
	if q.PartitionCount != nil {
		cur, err := admin.GetQueue(rq.ctx, &raftbusv1.GetQueueRequest{Name: name})
		if err != nil {
			return err
		}
		if err := samePartitioning(q.GetPartitionCount(), cur.GetQueue().GetPartitionCount()); err != nil {
			return err
		}
		q.PartitionCount = nil
	}
	resp, err := admin.UpdateQueue(rq.ctx, &raftbusv1.UpdateQueueRequest{Queue: q})
	if err != nil {
		return err
	}
	return rq.answerQueue(http.StatusOK, resp.GetQueue(), false)
}

func (rq *request) putTopic(name string, desc *element) error {
	t := &raftbusv1.TopicProperties{}
	if err := readProperties(topicProperties, desc, t.ProtoReflect()); err != nil {
		return badRequest("TopicDescription: %v", err)
	}
	t.Name = name
	admin := rq.h.cfg.Admin
	if !rq.updating() {
		resp, err := admin.CreateTopic(rq.ctx, &raftbusv1.CreateTopicRequest{Topic: t})
		if err != nil {
			return err
		}
		return rq.answerTopic(http.StatusCreated, resp.GetTopic(), false)
	}
	if t.PartitionCount != nil {
		cur, err := admin.GetTopic(rq.ctx, &raftbusv1.GetTopicRequest{Name: name})
		if err != nil {
			return err
		}
		if err := samePartitioning(t.GetPartitionCount(), cur.GetTopic().GetPartitionCount()); err != nil {
			return err
		}
		t.PartitionCount = nil
	}
	resp, err := admin.UpdateTopic(rq.ctx, &raftbusv1.UpdateTopicRequest{Topic: t})
	if err != nil {
		return err
	}
	return rq.answerTopic(http.StatusOK, resp.GetTopic(), false)
}

// samePartitioning lets an update name the partitioning an entity has
// (the SDKs send back what they read), and refuses a change: the
// partition count is fixed at creation.
func samePartitioning(asked, current uint32) error {
	if (asked > 1) != (current > 1) {
		return badRequest("EnablePartitioning is fixed at creation: the entity has %d partition(s)", current)
	}
	return nil
}

// answerQueue answers q with its counts. A GET needs them (the SDKs read
// the runtime properties from it) and fails without; the answer to a
// change has them when they can be read, since the change is made
// whether or not they can.
func (rq *request) answerQueue(status int, q *raftbusv1.QueueProperties, needCounts bool) error {
	rt, err := rq.h.cfg.Admin.GetQueueRuntimeProperties(rq.ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: q.GetName()})
	if err != nil && needCounts {
		return err
	}
	return rq.answerEntry(status, rq.queueEntry(q, rt.GetProperties()))
}

func (rq *request) queueEntry(q *raftbusv1.QueueProperties, rt *raftbusv1.RuntimeProperties) entry {
	d := &description{settings: q.ProtoReflect(), runtime: rt, host: rq.host, version: rq.version}
	return entry{path: q.GetName(), title: q.GetName(), created: q.GetCreatedAt(), updated: q.GetUpdatedAt(),
		content: func(w *xmlWriter) { writeDescription(w, "QueueDescription", queueProperties, d) }}
}

func (rq *request) answerTopic(status int, t *raftbusv1.TopicProperties, needCounts bool) error {
	rt, err := rq.h.cfg.Admin.GetTopicRuntimeProperties(rq.ctx, &raftbusv1.GetTopicRuntimePropertiesRequest{Name: t.GetName()})
	if err != nil && needCounts {
		return err
	}
	return rq.answerEntry(status, rq.topicEntry(t, rt.GetProperties()))
}

func (rq *request) topicEntry(t *raftbusv1.TopicProperties, rt *raftbusv1.RuntimeProperties) entry {
	d := &description{settings: t.ProtoReflect(), runtime: rt, host: rq.host, version: rq.version}
	return entry{path: t.GetName(), title: t.GetName(), created: t.GetCreatedAt(), updated: t.GetUpdatedAt(),
		content: func(w *xmlWriter) { writeDescription(w, "TopicDescription", topicProperties, d) }}
}

// subscription serves /{topic}/Subscriptions/{name}.
func (rq *request) subscription(topic, name string) error {
	admin := rq.h.cfg.Admin
	switch rq.r.Method {
	case http.MethodGet:
		resp, err := admin.GetSubscription(rq.ctx, &raftbusv1.GetSubscriptionRequest{TopicName: topic, SubscriptionName: name})
		if err != nil {
			return err
		}
		return rq.answerSubscription(http.StatusOK, resp.GetSubscription(), true)
	case http.MethodDelete:
		if _, err := admin.DeleteSubscription(rq.ctx, &raftbusv1.DeleteSubscriptionRequest{TopicName: topic, SubscriptionName: name}); err != nil {
			return err
		}
		rq.answer(http.StatusOK, "application/xml; charset=utf-8", "")
		return nil
	}
	desc, err := rq.readEntry()
	if err != nil {
		return err
	}
	if desc.name.Local != "SubscriptionDescription" {
		return badRequest("PUT of a subscription takes a SubscriptionDescription, not a %s", desc.name.Local)
	}
	s := &raftbusv1.SubscriptionProperties{}
	if err := readProperties(subscriptionProperties, desc, s.ProtoReflect()); err != nil {
		return badRequest("SubscriptionDescription: %v", err)
	}
	s.TopicName, s.SubscriptionName = topic, name
	if rq.updating() {
		resp, err := admin.UpdateSubscription(rq.ctx, &raftbusv1.UpdateSubscriptionRequest{Subscription: s})
		if err != nil {
			return err
		}
		return rq.answerSubscription(http.StatusOK, resp.GetSubscription(), false)
	}
	req := &raftbusv1.CreateSubscriptionRequest{Subscription: s}
	if d := desc.child("DefaultRuleDescription"); d != nil {
		ruleName := d.child("Name").value()
		if ruleName == "" {
			ruleName = defaultRuleName
		}
		if req.DefaultRule, err = readRule(d, ruleName); err != nil {
			return badRequest("DefaultRuleDescription: %v", err)
		}
	}
	resp, err := admin.CreateSubscription(rq.ctx, req)
	if err != nil {
		return err
	}
	return rq.answerSubscription(http.StatusCreated, resp.GetSubscription(), false)
}

func (rq *request) answerSubscription(status int, s *raftbusv1.SubscriptionProperties, needCounts bool) error {
	rt, err := rq.h.cfg.Admin.GetSubscriptionRuntimeProperties(rq.ctx, &raftbusv1.GetSubscriptionRuntimePropertiesRequest{
		TopicName: s.GetTopicName(), SubscriptionName: s.GetSubscriptionName()})
	if err != nil && needCounts {
		return err
	}
	return rq.answerEntry(status, rq.subscriptionEntry(s, rt.GetProperties()))
}

func (rq *request) subscriptionEntry(s *raftbusv1.SubscriptionProperties, rt *raftbusv1.RuntimeProperties) entry {
	d := &description{settings: s.ProtoReflect(), runtime: rt, host: rq.host, version: rq.version}
	return entry{path: s.GetTopicName() + "/Subscriptions/" + s.GetSubscriptionName(), title: s.GetSubscriptionName(),
		created: s.GetCreatedAt(), updated: s.GetUpdatedAt(),
		content: func(w *xmlWriter) { writeDescription(w, "SubscriptionDescription", subscriptionProperties, d) }}
}

// rule serves /{topic}/Subscriptions/{subscription}/Rules/{name}.
func (rq *request) rule(topic, sub, name string) error {
	admin := rq.h.cfg.Admin
	switch rq.r.Method {
	case http.MethodGet:
		resp, err := admin.GetRule(rq.ctx, &raftbusv1.GetRuleRequest{TopicName: topic, SubscriptionName: sub, RuleName: name})
		if err != nil {
			return err
		}
		return rq.answerEntry(http.StatusOK, rq.ruleEntry(topic, sub, resp.GetRule()))
	case http.MethodDelete:
		if _, err := admin.DeleteRule(rq.ctx, &raftbusv1.DeleteRuleRequest{TopicName: topic, SubscriptionName: sub, RuleName: name}); err != nil {
			return err
		}
		rq.answer(http.StatusOK, "application/xml; charset=utf-8", "")
		return nil
	}
	desc, err := rq.readEntry()
	if err != nil {
		return err
	}
	if desc.name.Local != "RuleDescription" {
		return badRequest("PUT of a rule takes a RuleDescription, not a %s", desc.name.Local)
	}
	r, err := readRule(desc, name)
	if err != nil {
		return badRequest("RuleDescription: %v", err)
	}
	if rq.updating() {
		resp, err := admin.UpdateRule(rq.ctx, &raftbusv1.UpdateRuleRequest{TopicName: topic, SubscriptionName: sub, Rule: r})
		if err != nil {
			return err
		}
		return rq.answerEntry(http.StatusOK, rq.ruleEntry(topic, sub, resp.GetRule()))
	}
	resp, err := admin.CreateRule(rq.ctx, &raftbusv1.CreateRuleRequest{TopicName: topic, SubscriptionName: sub, Rule: r})
	if err != nil {
		return err
	}
	return rq.answerEntry(http.StatusCreated, rq.ruleEntry(topic, sub, resp.GetRule()))
}

func (rq *request) ruleEntry(topic, sub string, r *raftbusv1.RuleProperties) entry {
	d := &description{host: rq.host, version: rq.version}
	return entry{path: topic + "/Subscriptions/" + sub + "/Rules/" + r.GetName(), title: r.GetName(),
		created: r.GetCreatedAt(), updated: r.GetCreatedAt(),
		content: func(w *xmlWriter) { writeRule(w, r, d) }}
}

// The lists: a page of entries each, every entity with its counts.

func (rq *request) listQueues() error {
	p, err := rq.page()
	if err != nil {
		return err
	}
	admin := rq.h.cfg.Admin
	queues, more, err := listPage(p, func(token string) ([]*raftbusv1.QueueProperties, string, error) {
		resp, err := admin.ListQueues(rq.ctx, &raftbusv1.ListQueuesRequest{PageSize: listPageSize, PageToken: token})
		return resp.GetQueues(), resp.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	var entries []entry
	for _, q := range queues {
		rt, err := admin.GetQueueRuntimeProperties(rq.ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: q.GetName()})
		if err != nil {
			if isNotFound(err) {
				continue // deleted since it was listed
			}
			return err
		}
		entries = append(entries, rq.queueEntry(q, rt.GetProperties()))
	}
	return rq.answerFeed("Queues", "$Resources/Queues", p, more, entries)
}

func (rq *request) listTopics() error {
	p, err := rq.page()
	if err != nil {
		return err
	}
	admin := rq.h.cfg.Admin
	topics, more, err := listPage(p, func(token string) ([]*raftbusv1.TopicProperties, string, error) {
		resp, err := admin.ListTopics(rq.ctx, &raftbusv1.ListTopicsRequest{PageSize: listPageSize, PageToken: token})
		return resp.GetTopics(), resp.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	var entries []entry
	for _, t := range topics {
		rt, err := admin.GetTopicRuntimeProperties(rq.ctx, &raftbusv1.GetTopicRuntimePropertiesRequest{Name: t.GetName()})
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return err
		}
		entries = append(entries, rq.topicEntry(t, rt.GetProperties()))
	}
	return rq.answerFeed("Topics", "$Resources/Topics", p, more, entries)
}

func (rq *request) listSubscriptions(topic string) error {
	p, err := rq.page()
	if err != nil {
		return err
	}
	admin := rq.h.cfg.Admin
	subs, more, err := listPage(p, func(token string) ([]*raftbusv1.SubscriptionProperties, string, error) {
		resp, err := admin.ListSubscriptions(rq.ctx, &raftbusv1.ListSubscriptionsRequest{TopicName: topic, PageSize: listPageSize, PageToken: token})
		return resp.GetSubscriptions(), resp.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	var entries []entry
	for _, s := range subs {
		rt, err := admin.GetSubscriptionRuntimeProperties(rq.ctx, &raftbusv1.GetSubscriptionRuntimePropertiesRequest{
			TopicName: topic, SubscriptionName: s.GetSubscriptionName()})
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return err
		}
		entries = append(entries, rq.subscriptionEntry(s, rt.GetProperties()))
	}
	return rq.answerFeed("Subscriptions", topic+"/Subscriptions", p, more, entries)
}

func (rq *request) listRules(topic, sub string) error {
	p, err := rq.page()
	if err != nil {
		return err
	}
	admin := rq.h.cfg.Admin
	rules, more, err := listPage(p, func(token string) ([]*raftbusv1.RuleProperties, string, error) {
		resp, err := admin.ListRules(rq.ctx, &raftbusv1.ListRulesRequest{TopicName: topic, SubscriptionName: sub, PageSize: listPageSize, PageToken: token})
		return resp.GetRules(), resp.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	var entries []entry
	for _, r := range rules {
		entries = append(entries, rq.ruleEntry(topic, sub, r))
	}
	return rq.answerFeed("Rules", topic+"/Subscriptions/"+sub+"/Rules", p, more, entries)
}

// listPageSize is the page the lists are read from the admin service
// in: its largest.
const listPageSize = 1000

// namespaceInfo answers GET /$namespaceinfo. raftbus records no time for
// the namespace, so both times are the zero time.
func (rq *request) namespaceInfo() error {
	name := namespaceName(rq.host)
	return rq.answerEntry(http.StatusOK, entry{path: "$namespaceinfo", title: name, content: func(w *xmlWriter) {
		w.open("NamespaceInfo", "xmlns", nsServiceBus, "xmlns:i", nsInstance)
		w.leaf("CreatedTime", formatTime(timeOf(nil)))
		w.leaf("MessagingSKU", "Standard")
		w.leaf("ModifiedTime", formatTime(timeOf(nil)))
		w.leaf("Name", name)
		w.leaf("NamespaceType", "Messaging")
		w.close("NamespaceInfo")
	}})
}
