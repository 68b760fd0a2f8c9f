package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func sqlRule(name, expr string) *raftbusv1.RuleProperties {
	return &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr}}}}
}

func colored(id, color string) *raftbusv1.Message {
	return &raftbusv1.Message{MessageId: id, Body: []byte(id), ApplicationProperties: map[string]*raftbusv1.PropertyValue{
		"color": {Value: &raftbusv1.PropertyValue_StringValue{StringValue: color}},
	}}
}

func TestTopicFansOutToSubscriptionsByRuleAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 3)
	admin := c.client(1).admin
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "events", PartitionCount: proto.Uint32(2)}}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []struct {
		name string
		rule *raftbusv1.RuleProperties
	}{{"all", nil}, {"red", sqlRule("red", "color = 'red'")}} {
		_, err := admin.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{
			Subscription: &raftbusv1.SubscriptionProperties{TopicName: "events", SubscriptionName: sub.name}, DefaultRule: sub.rule,
		})
		if err != nil {
			t.Fatalf("create subscription %s: %v", sub.name, err)
		}
	}
	_, err := admin.CreateRule(ctx, &raftbusv1.CreateRuleRequest{TopicName: "events", SubscriptionName: "red", Rule: sqlRule("broken", "color = 'red' AND")})
	if info := errorInfo(t, err); info.Reason != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("malformed filter: %v", info)
	}

	// Through another node: sends to the topic land in the subscriptions
	// whose rules match, in every partition.
	msg := c.client(2).msg
	for i := 0; i < 10; i++ {
		color := map[bool]string{true: "red", false: "blue"}[i%2 == 0]
		_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events", Messages: []*raftbusv1.Message{colored(fmt.Sprintf("m%d", i), color)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := drain(t, c.client(0), "events/subscriptions/all", 10, 20*time.Second); len(got) != 10 {
		t.Fatalf("all: %v", got)
	}
	got := drain(t, c.client(0), "events/subscriptions/red", 5, 20*time.Second)
	for id := range got {
		if id != "m0" && id != "m2" && id != "m4" && id != "m6" && id != "m8" {
			t.Fatalf("red received %s, which is blue", id)
		}
	}

	// Rules changed later apply to later messages only.
	if _, err := admin.DeleteRule(ctx, &raftbusv1.DeleteRuleRequest{TopicName: "events", SubscriptionName: "red", RuleName: "red"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateRule(ctx, &raftbusv1.CreateRuleRequest{TopicName: "events", SubscriptionName: "red", Rule: sqlRule("blue", "color = 'blue'")}); err != nil {
		t.Fatal(err)
	}
	// Answered means in effect: no waiting before the next send.
	if _, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events", Messages: []*raftbusv1.Message{colored("late-blue", "blue")}}); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, c.client(1), "events/subscriptions/red", 1, 20*time.Second); got["late-blue"] != 1 {
		t.Fatalf("red after its rule changed to blue: %v", got)
	}

	rt, err := admin.GetTopicRuntimeProperties(ctx, &raftbusv1.GetTopicRuntimePropertiesRequest{Name: "events"})
	if err != nil || rt.GetProperties().GetSubscriptionCount() != 2 {
		t.Fatalf("topic runtime %v, %v: want 2 subscriptions", rt, err)
	}
	if _, err := admin.DeleteSubscription(ctx, &raftbusv1.DeleteSubscriptionRequest{TopicName: "events", SubscriptionName: "all"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.client(2).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "events/subscriptions/all"})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("receive from a deleted subscription: %v", err)
	}
	_, err = msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events/subscriptions/red", Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("send to a subscription: %v", err)
	}
}

func TestUpdateReplacesADurationWhole(t *testing.T) {
	c := newTestCluster(t, 1)
	admin := c.client(0).admin
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", LockDuration: durationpb.New(1500 * time.Millisecond)})
	resp, err := admin.UpdateQueue(ctx, &raftbusv1.UpdateQueueRequest{Queue: &raftbusv1.QueueProperties{
		Name: "q", LockDuration: durationpb.New(2 * time.Second), DefaultMessageTimeToLive: durationpb.New(90 * time.Second),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if q := resp.GetQueue(); q.GetLockDuration().AsDuration() != 2*time.Second || q.GetDefaultMessageTimeToLive().AsDuration() != 90*time.Second {
		t.Fatalf("lock duration %v (was 1.5s, set 2s), time to live %v (was unlimited, set 90s)",
			q.GetLockDuration().AsDuration(), q.GetDefaultMessageTimeToLive().AsDuration())
	}
}

func TestUpdateKeepsUnsetSettings(t *testing.T) {
	c := newTestCluster(t, 1)
	admin := c.client(0).admin
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q", MaxDeliveryCount: proto.Int32(3), LockDuration: durationpb.New(10 * time.Second)})
	resp, err := admin.UpdateQueue(ctx, &raftbusv1.UpdateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "q", MaxDeliveryCount: proto.Int32(5)}})
	if err != nil {
		t.Fatal(err)
	}
	q := resp.GetQueue()
	if q.GetMaxDeliveryCount() != 5 || q.GetLockDuration().AsDuration() != 10*time.Second || q.GetCreatedAt() == nil {
		t.Fatalf("after updating max_delivery_count only: %v", q)
	}
	if _, err := admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{
		TopicName: "t", SubscriptionName: "s", MaxDeliveryCount: proto.Int32(2), LockDuration: durationpb.New(20 * time.Second),
	}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := admin.UpdateSubscription(ctx, &raftbusv1.UpdateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{
		TopicName: "t", SubscriptionName: "s", MaxDeliveryCount: proto.Int32(7),
	}})
	if err != nil || sub.GetSubscription().GetLockDuration().AsDuration() != 20*time.Second || sub.GetSubscription().GetMaxDeliveryCount() != 7 {
		t.Fatalf("subscription after update: %v, %v", sub, err)
	}
}
