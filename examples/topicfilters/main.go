// Command topicfilters routes orders published to one topic to the
// subscriptions that want them: each subscription has a rule, a SQL
// filter over the message's properties or a correlation filter matching
// them exactly, and gets a copy of every message its rule accepts. The
// publisher knows nothing of who listens.
//
//	go run ./examples/topicfilters [-server 127.0.0.1:7400]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const topic = "example-orders"

// subscriptions and their rules. A nil filter is the default rule, which
// accepts everything.
var subscriptions = []struct {
	name   string
	filter *raftbusv1.RuleFilter
}{
	{"audit", nil},
	{"big-eu", sqlFilter("region = 'eu' AND total >= 100")},
	{"americas", sqlFilter("region IN ('us', 'ca', 'br')")},
	// Correlation filters compare fields for equality only, which the
	// broker evaluates faster than SQL.
	{"express", &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_CorrelationFilter{
		CorrelationFilter: &raftbusv1.CorrelationFilter{Subject: "express"},
	}}},
}

type order struct {
	id       string
	region   string
	total    int
	shipping string
}

var orders = []order{
	{"o-1", "eu", 250, "standard"},
	{"o-2", "us", 80, "express"},
	{"o-3", "eu", 40, "express"},
	{"o-4", "ca", 500, "standard"},
	{"o-5", "eu", 100, "standard"},
	{"o-6", "jp", 90, "standard"},
}

func main() {
	server := flag.String("server", serverAddr(), "raftbusd nodes, comma-separated (env RAFTBUS_ADDR)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	got, err := run(ctx, strings.Split(*server, ","))
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range subscriptions {
		fmt.Printf("%-9s got %s\n", s.name, strings.Join(got[s.name], " "))
	}
}

func serverAddr() string {
	if a := os.Getenv("RAFTBUS_ADDR"); a != "" {
		return a
	}
	return client.DefaultAddress
}

// run publishes the orders and returns the ids each subscription got.
func run(ctx context.Context, server []string) (map[string][]string, error) {
	c, err := client.New(server, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	adm := admin.NewFromClient(c)
	if err := freshTopic(ctx, adm); err != nil {
		return nil, err
	}

	sender, err := c.NewSender(topic, nil)
	if err != nil {
		return nil, err
	}
	for _, o := range orders {
		// Filters see the properties and system fields, never the body.
		err := sender.SendMessage(ctx, &client.Message{
			MessageID:             o.id,
			Subject:               o.shipping,
			Body:                  fmt.Appendf(nil, `{"id":%q,"total":%d}`, o.id, o.total),
			ApplicationProperties: map[string]any{"region": o.region, "total": o.total},
		}, nil)
		if err != nil {
			return nil, err
		}
	}

	got := map[string][]string{}
	for _, s := range subscriptions {
		if got[s.name], err = drain(ctx, c, adm, s.name); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// drain receives what a subscription holds. A send to a topic returns
// once the message is in every subscription it goes to, so the
// subscription's count says how many to wait for.
func drain(ctx context.Context, c *client.Client, adm *admin.Client, subscription string) ([]string, error) {
	rt, err := adm.GetSubscriptionRuntimeProperties(ctx, topic, subscription)
	if err != nil {
		return nil, err
	}
	r, err := c.NewReceiverForSubscription(topic, subscription, &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	if err != nil {
		return nil, err
	}
	defer r.Close(context.Background())
	var ids []string
	for int64(len(ids)) < rt.ActiveMessageCount {
		msgs, err := r.ReceiveMessages(ctx, 100, nil)
		if err != nil {
			return ids, err
		}
		for _, m := range msgs {
			ids = append(ids, m.MessageID)
		}
	}
	return ids, nil
}

// freshTopic deletes and creates the example's topic (its subscriptions
// go with it) and subscribes with each rule.
func freshTopic(ctx context.Context, adm *admin.Client) error {
	if err := adm.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, client.ErrNotFound) {
		return err
	}
	if _, err := adm.CreateTopic(ctx, topic, nil); err != nil {
		return err
	}
	for _, s := range subscriptions {
		var rule *admin.RuleProperties
		if s.filter != nil {
			rule = &admin.RuleProperties{Name: s.name, Filter: s.filter}
		}
		if _, err := adm.CreateSubscription(ctx, topic, s.name, nil, rule); err != nil {
			return err
		}
	}
	return nil
}

func sqlFilter(expr string) *raftbusv1.RuleFilter {
	return &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr}}}
}
