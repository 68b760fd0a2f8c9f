package mgmtapi

import (
	"testing"

	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The bodies the Go SDK's admin.Client (azservicebus v1.11.0, api-version
// 2024-05) sends, captured from it, become the admin calls their settings
// say.
func TestGoRequestsBecomeTheAdminCalls(t *testing.T) {
	sqlAction := sqlRule("r-sql", "color = @c AND size > 3", map[string]*raftbusv1.PropertyValue{"@c": str("red")})
	sqlAction.Action = &raftbusv1.SqlRuleAction{SqlExpression: "SET sys.Label = 'x'; SET n = @n", Parameters: map[string]*raftbusv1.PropertyValue{"@n": i32(7)}}
	runRequestCases(t, "go", "2024-05", []requestCase{
		{"create-queue.xml", "/q2", false, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{
			Name: "q2", LockDuration: sec(30), MaxSizeInMegabytes: proto.Int64(2048), RequiresDuplicateDetection: proto.Bool(true),
			RequiresSession: proto.Bool(true), DefaultMessageTimeToLive: sec(3600), DeadLetteringOnMessageExpiration: proto.Bool(true),
			DuplicateDetectionHistoryTimeWindow: sec(300), MaxDeliveryCount: proto.Int32(5), EnableBatchedOperations: proto.Bool(true),
			AutoDeleteOnIdle: sec(600), PartitionCount: proto.Uint32(1), ForwardTo: "other", ForwardDeadLetteredMessagesTo: "dlq",
			MaxMessageSizeInKilobytes: proto.Int64(512)}}},
		{"update-queue.xml", "/q1", true, &raftbusv1.UpdateQueueRequest{Queue: &raftbusv1.QueueProperties{
			Name: "q1", MaxDeliveryCount: proto.Int32(7), LockDuration: sec(20)}}},
		{"create-topic.xml", "/t1", false, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{
			Name: "t1", DefaultMessageTimeToLive: sec(120), SupportOrdering: proto.Bool(true), MaxSizeInMegabytes: proto.Int64(1024)}}},
		{"create-subscription.xml", "/t1/Subscriptions/s1", false, &raftbusv1.CreateSubscriptionRequest{
			Subscription: &raftbusv1.SubscriptionProperties{TopicName: "t1", SubscriptionName: "s1", LockDuration: sec(45),
				MaxDeliveryCount: proto.Int32(3), DeadLetteringOnFilterEvaluationExceptions: proto.Bool(false), ForwardTo: "q1"},
			DefaultRule: sqlRule("eu", "region = 'eu'", nil)}},
		{"create-rule-sql.xml", "/t1/Subscriptions/s1/Rules/r-sql", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1", Rule: sqlAction}},
		{"create-rule-correlation.xml", "/t1/Subscriptions/s1/Rules/r-corr", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1",
			Rule: &raftbusv1.RuleProperties{Name: "r-corr", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: &raftbusv1.CorrelationFilter{
				CorrelationId: "cid", MessageId: "mid", To: "to", ReplyTo: "rt", Subject: "lbl", SessionId: "sid", ReplyToSessionId: "rsid", ContentType: "ct",
				ApplicationProperties: map[string]*raftbusv1.PropertyValue{
					"s": str("v"),
					"b": {Value: &raftbusv1.PropertyValue_BoolValue{BoolValue: true}},
					"d": {Value: &raftbusv1.PropertyValue_DoubleValue{DoubleValue: 1.5}},
				}}}}}}},
		{"create-rule-true.xml", "/t1/Subscriptions/s1/Rules/r-true", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1", Rule: trueRule("r-true")}},
		{"create-rule-false.xml", "/t1/Subscriptions/s1/Rules/r-false", false, &raftbusv1.CreateRuleRequest{TopicName: "t1", SubscriptionName: "s1",
			Rule: &raftbusv1.RuleProperties{Name: "r-false", Filter: &raftbusv1.RuleFilter{Filter: &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}}}}},
		{"update-rule.xml", "/t1/Subscriptions/s1/Rules/r-sql", true, &raftbusv1.UpdateRuleRequest{TopicName: "t1", SubscriptionName: "s1",
			Rule: sqlRule("r-sql", "size > 10", nil)}},
	})
}
