package client

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Message is a message to send. Field names follow azservicebus.
type Message struct {
	// MessageID identifies the message for duplicate detection. Set it to
	// make a send safe to retry when its outcome is unknown (see Sender).
	MessageID     string
	Body          []byte
	ContentType   string
	CorrelationID string
	// Subject is also known as Label.
	Subject          string
	To               string
	ReplyTo          string
	ReplyToSessionID string
	// SessionID groups messages for ordered processing; required on
	// session entities.
	SessionID string
	// PartitionKey chooses the partition when there is no SessionID.
	PartitionKey string
	// TimeToLive: nil takes the entity's default.
	TimeToLive *time.Duration
	// ScheduledEnqueueTime, when set and in the future, schedules the
	// message.
	ScheduledEnqueueTime *time.Time
	// ApplicationProperties hold string, bool, int8, int16, int32, int64,
	// uint8, uint16, uint32, uint64, float32, float64, []byte and time.Time
	// values, and come back with the same types; an int comes back an
	// int64, a uint a uint64. Filters compare the numbers by value
	// whatever their types.
	ApplicationProperties map[string]any
}

// MessageState is where a received or peeked message stands.
type MessageState int32

const (
	MessageStateActive    = MessageState(raftbusv1.MessageState_MESSAGE_STATE_ACTIVE)
	MessageStateDeferred  = MessageState(raftbusv1.MessageState_MESSAGE_STATE_DEFERRED)
	MessageStateScheduled = MessageState(raftbusv1.MessageState_MESSAGE_STATE_SCHEDULED)
)

// ReceivedMessage is a message handed out by a receive or a peek.
type ReceivedMessage struct {
	MessageID             string
	Body                  []byte
	ContentType           string
	CorrelationID         string
	Subject               string
	To                    string
	ReplyTo               string
	ReplyToSessionID      string
	SessionID             string
	PartitionKey          string
	TimeToLive            time.Duration
	ScheduledEnqueueTime  *time.Time
	ApplicationProperties map[string]any

	// SequenceNumber is unique and increasing per partition; for a
	// partitioned entity its top 16 bits are the partition id. A
	// dead-lettered message keeps it: look it up in the dead-letter
	// sub-queue by the number it was sent with.
	SequenceNumber int64
	// EnqueuedSequenceNumber is the number the message had where it was
	// first enqueued; SequenceNumber but for a forwarded message.
	EnqueuedSequenceNumber int64
	EnqueuedTime           time.Time
	ExpiresAt              time.Time
	// LockToken settles the message (PeekLock receives only).
	LockToken [16]byte
	// LockedUntil is when the lock ends unless renewed.
	LockedUntil                time.Time
	DeliveryCount              uint32
	State                      MessageState
	DeadLetterReason           string
	DeadLetterErrorDescription string
	DeadLetterSource           string
	// PartitionID is the partition holding the message.
	PartitionID uint32

	// Where the message was received from, for settlement.
	entityPath string
	subQueue   raftbusv1.SubQueue
	session    *raftbusv1.SessionLock
	// onDone, set by a Processor, frees the message's place once handled.
	onDone func()
}

func (m *ReceivedMessage) done() {
	if m.onDone != nil {
		m.onDone()
	}
}

func toProtoMessage(m *Message) (*raftbusv1.Message, error) {
	if m == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "nil message"}
	}
	pm := &raftbusv1.Message{
		MessageId: m.MessageID, Body: m.Body, ContentType: m.ContentType, CorrelationId: m.CorrelationID,
		Subject: m.Subject, To: m.To, ReplyTo: m.ReplyTo, ReplyToSessionId: m.ReplyToSessionID,
		SessionId: m.SessionID, PartitionKey: m.PartitionKey,
	}
	if m.TimeToLive != nil {
		pm.TimeToLive = durationpb.New(*m.TimeToLive)
	}
	if m.ScheduledEnqueueTime != nil {
		pm.ScheduledEnqueueTime = timestamppb.New(*m.ScheduledEnqueueTime)
	}
	props, err := toProtoProperties(m.ApplicationProperties)
	if err != nil {
		return nil, err
	}
	pm.ApplicationProperties = props
	return pm, nil
}

func toProtoProperties(props map[string]any) (map[string]*raftbusv1.PropertyValue, error) {
	if len(props) == 0 {
		return nil, nil
	}
	out := make(map[string]*raftbusv1.PropertyValue, len(props))
	for k, v := range props {
		pv, err := toPropertyValue(v)
		if err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("application property %q: %v", k, err)}
		}
		out[k] = pv
	}
	return out, nil
}

func toPropertyValue(v any) (*raftbusv1.PropertyValue, error) {
	var pv raftbusv1.PropertyValue
	switch x := v.(type) {
	case string:
		pv.Value = &raftbusv1.PropertyValue_StringValue{StringValue: x}
	case bool:
		pv.Value = &raftbusv1.PropertyValue_BoolValue{BoolValue: x}
	case int:
		pv.Value = &raftbusv1.PropertyValue_IntValue{IntValue: int64(x)}
	case int64:
		pv.Value = &raftbusv1.PropertyValue_IntValue{IntValue: x}
	case int32:
		pv.Value = &raftbusv1.PropertyValue_Int32Value{Int32Value: x}
	case int16:
		pv.Value = &raftbusv1.PropertyValue_Int16Value{Int16Value: int32(x)}
	case int8:
		pv.Value = &raftbusv1.PropertyValue_Int8Value{Int8Value: int32(x)}
	case uint:
		pv.Value = &raftbusv1.PropertyValue_Uint64Value{Uint64Value: uint64(x)}
	case uint64:
		pv.Value = &raftbusv1.PropertyValue_Uint64Value{Uint64Value: x}
	case uint32:
		pv.Value = &raftbusv1.PropertyValue_Uint32Value{Uint32Value: x}
	case uint16:
		pv.Value = &raftbusv1.PropertyValue_Uint16Value{Uint16Value: uint32(x)}
	case uint8:
		pv.Value = &raftbusv1.PropertyValue_Uint8Value{Uint8Value: uint32(x)}
	case float64:
		pv.Value = &raftbusv1.PropertyValue_DoubleValue{DoubleValue: x}
	case float32:
		pv.Value = &raftbusv1.PropertyValue_FloatValue{FloatValue: x}
	case []byte:
		pv.Value = &raftbusv1.PropertyValue_BytesValue{BytesValue: x}
	case time.Time:
		pv.Value = &raftbusv1.PropertyValue_TimestampValue{TimestampValue: timestamppb.New(x)}
	default:
		return nil, fmt.Errorf("unsupported type %T", v)
	}
	return &pv, nil
}

// fromProtoProperties gives each property the Go type of its kind: the
// type it was sent with, except that an int comes back an int64 and a
// uint a uint64.
func fromProtoProperties(props map[string]*raftbusv1.PropertyValue) map[string]any {
	if len(props) == 0 {
		return nil
	}
	out := make(map[string]any, len(props))
	for k, v := range props {
		switch x := v.GetValue().(type) {
		case *raftbusv1.PropertyValue_StringValue:
			out[k] = x.StringValue
		case *raftbusv1.PropertyValue_BoolValue:
			out[k] = x.BoolValue
		case *raftbusv1.PropertyValue_IntValue:
			out[k] = x.IntValue
		case *raftbusv1.PropertyValue_DoubleValue:
			out[k] = x.DoubleValue
		case *raftbusv1.PropertyValue_BytesValue:
			out[k] = x.BytesValue
		case *raftbusv1.PropertyValue_TimestampValue:
			out[k] = x.TimestampValue.AsTime()
		case *raftbusv1.PropertyValue_Int32Value:
			out[k] = x.Int32Value
		case *raftbusv1.PropertyValue_Int16Value:
			out[k] = int16(x.Int16Value)
		case *raftbusv1.PropertyValue_Int8Value:
			out[k] = int8(x.Int8Value)
		case *raftbusv1.PropertyValue_Uint64Value:
			out[k] = x.Uint64Value
		case *raftbusv1.PropertyValue_Uint32Value:
			out[k] = x.Uint32Value
		case *raftbusv1.PropertyValue_Uint16Value:
			out[k] = uint16(x.Uint16Value)
		case *raftbusv1.PropertyValue_Uint8Value:
			out[k] = uint8(x.Uint8Value)
		case *raftbusv1.PropertyValue_FloatValue:
			out[k] = x.FloatValue
		}
	}
	return out
}

func fromProtoReceived(rm *raftbusv1.ReceivedMessage, path string, sub raftbusv1.SubQueue, session *raftbusv1.SessionLock) *ReceivedMessage {
	m := rm.GetMessage()
	out := &ReceivedMessage{
		MessageID: m.GetMessageId(), Body: m.GetBody(), ContentType: m.GetContentType(), CorrelationID: m.GetCorrelationId(),
		Subject: m.GetSubject(), To: m.GetTo(), ReplyTo: m.GetReplyTo(), ReplyToSessionID: m.GetReplyToSessionId(),
		SessionID: m.GetSessionId(), PartitionKey: m.GetPartitionKey(), TimeToLive: m.GetTimeToLive().AsDuration(),
		ApplicationProperties:  fromProtoProperties(m.GetApplicationProperties()),
		SequenceNumber:         rm.GetSequenceNumber(),
		EnqueuedSequenceNumber: rm.GetEnqueuedSequenceNumber(),
		EnqueuedTime:           timeOf(rm.GetEnqueuedTime()),
		ExpiresAt:              timeOf(rm.GetExpiresAt()),
		LockedUntil:            timeOf(rm.GetLockedUntil()),
		DeliveryCount:          uint32(rm.GetDeliveryCount()),
		State:                  MessageState(rm.GetState()),
		DeadLetterReason:       rm.GetDeadLetterReason(), DeadLetterErrorDescription: rm.GetDeadLetterErrorDescription(),
		DeadLetterSource: rm.GetDeadLetterSource(),
		PartitionID:      rm.GetPartitionId(),
		entityPath:       path, subQueue: sub, session: session,
	}
	if m.GetScheduledEnqueueTime() != nil {
		t := m.GetScheduledEnqueueTime().AsTime()
		out.ScheduledEnqueueTime = &t
	}
	copy(out.LockToken[:], rm.GetLockToken())
	return out
}

func fromProtoReceivedList(list []*raftbusv1.ReceivedMessage, path string, sub raftbusv1.SubQueue, session *raftbusv1.SessionLock) []*ReceivedMessage {
	out := make([]*ReceivedMessage, 0, len(list))
	for _, rm := range list {
		out = append(out, fromProtoReceived(rm, path, sub, session))
	}
	return out
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// messageSize estimates a message's encoded size, the measure batches are
// checked against.
func messageSize(pm *raftbusv1.Message) int { return proto.Size(pm) }
