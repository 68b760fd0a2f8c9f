package servicebus

import (
	"context"
	"fmt"
	"strings"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

// entity is what a link address names.
type entity struct {
	// Path is the raftbus entity path: "queue", "topic" or
	// "topic/subscriptions/sub".
	Path string
	// Topic and Subscription are set for a subscription.
	Topic, Subscription string
	SubQueue            client.SubQueue
	// Management: the address is the entity's $management node.
	Management bool
	// Session is the session a management request is about: the one its
	// session receiver holds.
	Session string
}

const (
	cbsAddress       = "$cbs"
	managementSuffix = "/$management"
	deadLetterSuffix = "/$deadletterqueue"
	subscriptionsSep = "/subscriptions/"
)

// parseAddress reads a Service Bus link address: an entity path, perhaps
// with "/$DeadLetterQueue" and then "/$management". The SDKs spell
// "Subscriptions" and "$DeadLetterQueue" in any case, as Service Bus
// accepts; an "sb://host/" prefix is dropped.
func parseAddress(addr string) (entity, error) {
	var e entity
	a := addr
	if i := strings.Index(a, "://"); i >= 0 {
		a = a[i+3:]
		if j := strings.IndexByte(a, '/'); j >= 0 {
			a = a[j+1:]
		} else {
			a = ""
		}
	}
	a = strings.TrimPrefix(a, "/")
	if hasSuffixFold(a, managementSuffix) {
		e.Management = true
		a = a[:len(a)-len(managementSuffix)]
	}
	if hasSuffixFold(a, deadLetterSuffix) {
		e.SubQueue = client.SubQueueDeadLetter
		a = a[:len(a)-len(deadLetterSuffix)]
	}
	if a == "" || strings.HasPrefix(a, "$") || strings.Contains(a, "/$") || strings.HasSuffix(a, "/") {
		return e, fmt.Errorf("%q is not an entity address this broker serves", addr)
	}
	if i := strings.Index(strings.ToLower(a), subscriptionsSep); i >= 0 {
		e.Topic, e.Subscription = a[:i], a[i+len(subscriptionsSep):]
		if e.Topic == "" || e.Subscription == "" || strings.Contains(e.Subscription, "/") {
			return e, fmt.Errorf("%q is not a subscription address (topic/Subscriptions/name)", addr)
		}
		e.Path = e.Topic + subscriptionsSep + e.Subscription
		return e, nil
	}
	e.Path = a
	return e, nil
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// resolve spells e's names as the cluster does when they differ from it
// only in case: Service Bus entity names are case-insensitive, raftbus's
// are not, and an application may spell a name otherwise than whoever
// created the entity. A name that exists as given is taken as it is (the
// usual case costs one lookup); one found in no case is left for the
// attach to refuse.
func (c *connection) resolve(ctx context.Context, e entity) entity {
	if e.Subscription != "" {
		topic := resolveName(e.Topic, func() bool {
			_, err := c.admin.GetTopic(ctx, e.Topic)
			return !isNotFound(err)
		}, func() ([]string, error) {
			t, err := c.admin.ListTopics(ctx)
			return names(t, err, (*admin.TopicProperties).GetName)
		})
		sub := resolveName(e.Subscription, func() bool {
			_, err := c.admin.GetSubscription(ctx, topic, e.Subscription)
			return !isNotFound(err)
		}, func() ([]string, error) {
			subs, err := c.admin.ListSubscriptions(ctx, topic)
			return names(subs, err, (*admin.SubscriptionProperties).GetSubscriptionName)
		})
		e.Topic, e.Subscription = topic, sub
		e.Path = topic + subscriptionsSep + sub
		return e
	}
	e.Path = resolveName(e.Path, func() bool {
		if _, err := c.admin.GetQueue(ctx, e.Path); !isNotFound(err) {
			return true
		}
		_, err := c.admin.GetTopic(ctx, e.Path)
		return !isNotFound(err)
	}, func() ([]string, error) {
		q, err := c.admin.ListQueues(ctx)
		queues, err := names(q, err, (*admin.QueueProperties).GetName)
		if err != nil {
			return nil, err
		}
		t, err := c.admin.ListTopics(ctx)
		topics, err := names(t, err, (*admin.TopicProperties).GetName)
		return append(queues, topics...), err
	})
	return e
}

// resolveName is name as it exists, or the one name of list equal to it
// but for case; name itself when exists says so, or when no other or more
// than one matches.
func resolveName(name string, exists func() bool, list func() ([]string, error)) string {
	if exists() {
		return name
	}
	all, err := list()
	if err != nil {
		return name
	}
	found := ""
	for _, n := range all {
		if strings.EqualFold(n, name) {
			if found != "" {
				return name // ambiguous: refuse as not found
			}
			found = n
		}
	}
	if found == "" {
		return name
	}
	return found
}

func names[T any](entities []T, err error, nameOf func(T) string) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, len(entities))
	for i, e := range entities {
		out[i] = nameOf(e)
	}
	return out, nil
}
