package servicebus

import (
	"fmt"
	"strings"

	"github.com/raftbus/raftbus/client"
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
