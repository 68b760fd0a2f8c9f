package raftbusv1_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The public API is a contract: these operations must stay in it.
func TestServicesOfferEveryOperation(t *testing.T) {
	tests := []struct {
		service protoreflect.ServiceDescriptor
		methods []string
	}{
		{
			service: raftbusv1.File_raftbus_v1_messaging_proto.Services().ByName("MessagingService"),
			methods: []string{
				"Send", "Schedule", "CancelScheduled", "Receive", "Complete", "Abandon",
				"DeadLetter", "Defer", "RenewLock", "ReceiveDeferred", "Peek",
				"AcceptSession", "RenewSessionLock", "GetSessionState", "SetSessionState",
				"CloseSession",
			},
		},
		{
			service: raftbusv1.File_raftbus_v1_admin_proto.Services().ByName("AdminService"),
			methods: []string{
				"CreateQueue", "GetQueue", "UpdateQueue", "DeleteQueue", "ListQueues", "GetQueueRuntimeProperties",
				"CreateTopic", "GetTopic", "UpdateTopic", "DeleteTopic", "ListTopics", "GetTopicRuntimeProperties",
				"CreateSubscription", "GetSubscription", "UpdateSubscription", "DeleteSubscription",
				"ListSubscriptions", "GetSubscriptionRuntimeProperties",
				"CreateRule", "GetRule", "UpdateRule", "DeleteRule", "ListRules",
				"GetClusterInfo", "GetRoutingTable",
			},
		},
	}
	for _, tt := range tests {
		if tt.service == nil {
			t.Fatal("service missing from the descriptors")
		}
		for _, m := range tt.methods {
			if tt.service.Methods().ByName(protoreflect.Name(m)) == nil {
				t.Errorf("%s has no method %s", tt.service.FullName(), m)
			}
		}
	}
}

// Service Bus field names, as users of the Azure SDK know them.
func TestMessagesCarryServiceBusFields(t *testing.T) {
	tests := []struct {
		message protoreflect.MessageDescriptor
		fields  []string
	}{
		{(&raftbusv1.Message{}).ProtoReflect().Descriptor(), []string{
			"message_id", "body", "content_type", "correlation_id", "subject", "to", "reply_to",
			"reply_to_session_id", "session_id", "partition_key", "time_to_live",
			"scheduled_enqueue_time", "application_properties",
		}},
		{(&raftbusv1.ReceivedMessage{}).ProtoReflect().Descriptor(), []string{
			"message", "sequence_number", "enqueued_time", "enqueued_sequence_number", "lock_token",
			"locked_until", "delivery_count", "state", "expires_at", "dead_letter_reason",
			"dead_letter_error_description", "dead_letter_source", "partition_id",
		}},
		{(&raftbusv1.QueueProperties{}).ProtoReflect().Descriptor(), []string{
			"lock_duration", "max_delivery_count", "requires_session", "default_message_time_to_live",
			"dead_lettering_on_message_expiration", "requires_duplicate_detection",
			"duplicate_detection_history_time_window", "max_size_in_megabytes",
			"max_message_size_in_kilobytes", "enable_batched_operations", "forward_to",
			"forward_dead_lettered_messages_to", "partition_count",
		}},
		{(&raftbusv1.ErrorInfo{}).ProtoReflect().Descriptor(), []string{
			"reason", "message", "tracking_id", "retryable", "leader",
		}},
	}
	for _, tt := range tests {
		for _, f := range tt.fields {
			if tt.message.Fields().ByName(protoreflect.Name(f)) == nil {
				t.Errorf("%s has no field %s", tt.message.FullName(), f)
			}
		}
	}
}
