package servicebus

import (
	"testing"

	"github.com/raftbus/raftbus/client"
)

func TestParseAddressReadsServiceBusPaths(t *testing.T) {
	cases := []struct {
		addr string
		want entity
	}{
		{"orders", entity{Path: "orders"}},
		{"orders/$management", entity{Path: "orders", Management: true}},
		{"orders/$DeadLetterQueue", entity{Path: "orders", SubQueue: client.SubQueueDeadLetter}},
		{"orders/$deadletterqueue/$Management", entity{Path: "orders", SubQueue: client.SubQueueDeadLetter, Management: true}},
		{"events/Subscriptions/audit", entity{Path: "events/subscriptions/audit", Topic: "events", Subscription: "audit"}},
		{"events/subscriptions/audit/$DeadLetterQueue", entity{Path: "events/subscriptions/audit", Topic: "events", Subscription: "audit", SubQueue: client.SubQueueDeadLetter}},
		{"sb://127.0.0.1:5672/orders", entity{Path: "orders"}},
	}
	for _, c := range cases {
		got, err := parseAddress(c.addr)
		if err != nil {
			t.Errorf("parseAddress(%q): %v", c.addr, err)
			continue
		}
		if got != c.want {
			t.Errorf("parseAddress(%q) = %+v, want %+v", c.addr, got, c.want)
		}
	}
	for _, bad := range []string{"", "/", "$management", "orders/$Transfer/$DeadLetterQueue", "events/Subscriptions/", "events/Subscriptions/a/b"} {
		if e, err := parseAddress(bad); err == nil {
			t.Errorf("parseAddress(%q) = %+v, want an error", bad, e)
		}
	}
}
