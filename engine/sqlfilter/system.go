package sqlfilter

// SystemProperty names a broker-defined message property (sys.Name).
type SystemProperty uint8

// The system properties a filter can read. SysLabel is also spelled
// sys.Subject.
const (
	SysMessageID SystemProperty = iota + 1
	SysCorrelationID
	SysTo
	SysReplyTo
	SysLabel
	SysSessionID
	SysReplyToSessionID
	SysContentType
	SysSequenceNumber
	SysEnqueuedTimeUtc
	SysScheduledEnqueueTimeUtc
	SysTimeToLive
	SysDeliveryCount
	SysSize
	numSystemProperties
)

type systemInfo struct {
	name     string // canonical spelling, without "sys."
	kind     Kind   // the kind of its values
	writable bool   // an action may SET it
}

var systemProperties = [numSystemProperties]systemInfo{
	SysMessageID:               {"MessageId", KindString, true},
	SysCorrelationID:           {"CorrelationId", KindString, true},
	SysTo:                      {"To", KindString, true},
	SysReplyTo:                 {"ReplyTo", KindString, true},
	SysLabel:                   {"Label", KindString, true},
	SysSessionID:               {"SessionId", KindString, false},
	SysReplyToSessionID:        {"ReplyToSessionId", KindString, true},
	SysContentType:             {"ContentType", KindString, true},
	SysSequenceNumber:          {"SequenceNumber", KindInt, false},
	SysEnqueuedTimeUtc:         {"EnqueuedTimeUtc", KindTime, false},
	SysScheduledEnqueueTimeUtc: {"ScheduledEnqueueTimeUtc", KindTime, false},
	SysTimeToLive:              {"TimeToLive", KindFloat, false},
	SysDeliveryCount:           {"DeliveryCount", KindInt, false},
	SysSize:                    {"Size", KindInt, false},
}

// String returns the property as written in an expression, e.g. sys.Label.
func (p SystemProperty) String() string {
	if p == 0 || p >= numSystemProperties {
		return "sys.?"
	}
	return "sys." + systemProperties[p].name
}

// Kind returns the kind of the property's values: string for the
// identifiers, int64 for SequenceNumber, DeliveryCount and Size, timestamp
// for the times, float64 seconds for TimeToLive.
func (p SystemProperty) Kind() Kind {
	if p == 0 || p >= numSystemProperties {
		return KindNull
	}
	return systemProperties[p].kind
}

// Writable reports whether a rule action may SET the property. Session ids
// stay fixed because they decide a message's partition, and the
// broker-assigned properties cannot be changed.
func (p SystemProperty) Writable() bool {
	return p > 0 && p < numSystemProperties && systemProperties[p].writable
}

// LookupSystemProperty finds a system property by name (without "sys."),
// case-insensitively.
func LookupSystemProperty(name string) (SystemProperty, bool) {
	if equalFoldASCII(name, "Subject") {
		return SysLabel, true
	}
	for p := SystemProperty(1); p < numSystemProperties; p++ {
		if equalFoldASCII(name, systemProperties[p].name) {
			return p, true
		}
	}
	return 0, false
}

// Message is what filters read. The engine implements it over its stored
// messages; both methods must be cheap and must not allocate.
type Message interface {
	// System returns a system property, or false when the message does not
	// have it (an empty CorrelationId, an unscheduled message's
	// ScheduledEnqueueTimeUtc), which filters treat as NULL. Values should
	// have the property's Kind; sys.TimeToLive uses DurationValue.
	System(p SystemProperty) (Value, bool)
	// User returns an application property by exact (case-sensitive) name.
	User(name string) (Value, bool)
}

// MutableMessage is what rule actions change: the copy of a message a
// subscription is about to store.
type MutableMessage interface {
	Message
	// SetUser sets an application property to a non-null value.
	SetUser(name string, v Value)
	// RemoveUser deletes an application property; absent is not an error.
	RemoveUser(name string)
	// SetSystem sets a writable system property (p.Writable()) to a string
	// Value, or clears it when v is null.
	SetSystem(p SystemProperty, v Value)
}
