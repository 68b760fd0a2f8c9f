package servicebus

import (
	"fmt"
	"math"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/client"
)

// The message annotations Service Bus defines. The SDKs type-assert their
// values without checks, so each carries exactly the type noted.
const (
	annSequenceNumber        = goamqp.Symbol("x-opt-sequence-number")         // long
	annEnqueuedTime          = goamqp.Symbol("x-opt-enqueued-time")           // timestamp
	annLockedUntil           = goamqp.Symbol("x-opt-locked-until")            // timestamp
	annPartitionKey          = goamqp.Symbol("x-opt-partition-key")           // string
	annScheduledEnqueueTime  = goamqp.Symbol("x-opt-scheduled-enqueue-time")  // timestamp
	annEnqueueSequenceNumber = goamqp.Symbol("x-opt-enqueue-sequence-number") // long
	annDeadLetterSource      = goamqp.Symbol("x-opt-deadletter-source")       // string
	annMessageState          = goamqp.Symbol("x-opt-message-state")           // int: 0 active, 1 deferred, 2 scheduled
	annLockToken             = goamqp.Symbol("x-opt-lock-token")              // uuid (delivery annotation)

	propDeadLetterReason      = "DeadLetterReason"
	propDeadLetterDescription = "DeadLetterErrorDescription"
)

// toClientMessage converts a message an SDK sent.
func toClientMessage(m *goamqp.Message) (*client.Message, error) {
	out := &client.Message{}
	switch {
	case len(m.Data) == 1:
		out.Body = m.Data[0]
	case len(m.Data) > 1:
		for _, d := range m.Data {
			out.Body = append(out.Body, d...)
		}
	case m.Value != nil || len(m.Sequence) > 0:
		return nil, fmt.Errorf("message bodies of amqp-value or amqp-sequence sections are not supported yet: send the body as data")
	}
	if p := m.Properties; p != nil {
		out.MessageID = idString(p.MessageID)
		out.CorrelationID = idString(p.CorrelationID)
		out.ContentType = deref(p.ContentType)
		out.Subject = deref(p.Subject)
		out.To = deref(p.To)
		out.ReplyTo = deref(p.ReplyTo)
		out.SessionID = deref(p.GroupID)
		out.ReplyToSessionID = deref(p.ReplyToGroupID)
	}
	if h := m.Header; h != nil && h.TTL > 0 {
		ttl := h.TTL
		out.TimeToLive = &ttl
	}
	for k, v := range m.Annotations {
		switch fmt.Sprint(k) {
		case string(annPartitionKey):
			if s, ok := v.(string); ok {
				out.PartitionKey = s
			}
		case string(annScheduledEnqueueTime):
			if t, ok := v.(time.Time); ok {
				out.ScheduledEnqueueTime = &t
			}
		}
	}
	if len(m.ApplicationProperties) > 0 {
		out.ApplicationProperties = make(map[string]any, len(m.ApplicationProperties))
		for k, v := range m.ApplicationProperties {
			cv, err := toPropertyValue(v)
			if err != nil {
				return nil, fmt.Errorf("application property %q: %w", k, err)
			}
			out.ApplicationProperties[k] = cv
		}
	}
	return out, nil
}

// toPropertyValue maps an AMQP property value onto the types raftbus
// stores, without loss: each AMQP number type has a kind of its own, and
// comes back as the same AMQP type.
func toPropertyValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
		float32, float64, []byte, time.Time:
		return x, nil
	case goamqp.UUID:
		return x.String(), nil
	case goamqp.Symbol:
		return string(x), nil
	}
	return nil, fmt.Errorf("values of type %T are not supported", v)
}

func idString(id any) string {
	switch x := id.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case goamqp.UUID:
		return x.String()
	}
	return fmt.Sprint(id)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// fromReceived converts a received or peeked message for an SDK, with
// the broker's annotations. locked: it was received in peek-lock mode
// (it then carries its lock).
func fromReceived(rm *client.ReceivedMessage, locked bool) *goamqp.Message {
	m := &goamqp.Message{
		Data:   [][]byte{rm.Body},
		Header: &goamqp.MessageHeader{Durable: true, Priority: 4},
		Properties: &goamqp.MessageProperties{
			To: ptr(rm.To), Subject: ptr(rm.Subject), ReplyTo: ptr(rm.ReplyTo), ContentType: ptr(rm.ContentType),
			GroupID: ptr(rm.SessionID), ReplyToGroupID: ptr(rm.ReplyToSessionID),
		},
		Annotations: goamqp.Annotations{
			annSequenceNumber: rm.SequenceNumber,
			annEnqueuedTime:   rm.EnqueuedTime.UTC(),
		},
	}
	if rm.MessageID != "" {
		m.Properties.MessageID = rm.MessageID
	}
	if rm.CorrelationID != "" {
		m.Properties.CorrelationID = rm.CorrelationID
	}
	// The header counts earlier failed deliveries; the broker counts
	// deliveries, this one included.
	if rm.DeliveryCount > 0 {
		m.Header.DeliveryCount = rm.DeliveryCount - 1
	}
	// The header's ttl is a uint of milliseconds: a longer one (an
	// entity's unlimited default) is left out, as Service Bus does,
	// rather than wrapped around to a short one.
	if rm.TimeToLive > 0 && rm.TimeToLive/time.Millisecond <= math.MaxUint32 {
		m.Header.TTL = rm.TimeToLive
	}
	if !rm.ExpiresAt.IsZero() {
		t := rm.ExpiresAt.UTC()
		m.Properties.AbsoluteExpiryTime = &t
	}
	if locked {
		m.Annotations[annLockedUntil] = rm.LockedUntil.UTC()
		m.DeliveryAnnotations = goamqp.Annotations{annLockToken: goamqp.UUID(rm.LockToken)}
	}
	if rm.PartitionKey != "" {
		m.Annotations[annPartitionKey] = rm.PartitionKey
	}
	if rm.ScheduledEnqueueTime != nil {
		m.Annotations[annScheduledEnqueueTime] = rm.ScheduledEnqueueTime.UTC()
	}
	if rm.EnqueuedSequenceNumber != 0 {
		m.Annotations[annEnqueueSequenceNumber] = rm.EnqueuedSequenceNumber
	}
	if rm.DeadLetterSource != "" {
		m.Annotations[annDeadLetterSource] = rm.DeadLetterSource
	}
	switch rm.State {
	case client.MessageStateDeferred:
		m.Annotations[annMessageState] = int32(1)
	case client.MessageStateScheduled:
		m.Annotations[annMessageState] = int32(2)
	}
	if len(rm.ApplicationProperties) > 0 || rm.DeadLetterReason != "" || rm.DeadLetterErrorDescription != "" {
		m.ApplicationProperties = make(map[string]any, len(rm.ApplicationProperties)+2)
		for k, v := range rm.ApplicationProperties {
			m.ApplicationProperties[k] = v
		}
		// The SDKs read the dead-letter reason from these properties.
		if rm.DeadLetterReason != "" {
			m.ApplicationProperties[propDeadLetterReason] = rm.DeadLetterReason
		}
		if rm.DeadLetterErrorDescription != "" {
			m.ApplicationProperties[propDeadLetterDescription] = rm.DeadLetterErrorDescription
		}
	}
	return m
}

// dotNetGUID converts a lock token between RFC 4122 byte order and the
// .NET GUID order Service Bus uses for delivery tags (the first three
// groups little-endian). The conversion is its own inverse.
func dotNetGUID(u [16]byte) []byte {
	b := u
	b[0], b[1], b[2], b[3] = u[3], u[2], u[1], u[0]
	b[4], b[5] = u[5], u[4]
	b[6], b[7] = u[7], u[6]
	return b[:]
}
