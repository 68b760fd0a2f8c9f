package sqlfilter

import "time"

// testMessage is a Message and MutableMessage over plain fields, shaped like
// the engine's: an array for system properties, a map for user ones.
type testMessage struct {
	sys    [numSystemProperties]Value
	hasSys [numSystemProperties]bool
	user   map[string]Value
}

func (m *testMessage) System(p SystemProperty) (Value, bool) {
	if p == 0 || p >= numSystemProperties || !m.hasSys[p] {
		return Value{}, false
	}
	return m.sys[p], true
}

func (m *testMessage) User(name string) (Value, bool) {
	v, ok := m.user[name]
	return v, ok
}

func (m *testMessage) SetUser(name string, v Value) {
	if m.user == nil {
		m.user = map[string]Value{}
	}
	m.user[name] = v
}

func (m *testMessage) RemoveUser(name string) { delete(m.user, name) }

func (m *testMessage) SetSystem(p SystemProperty, v Value) {
	m.sys[p], m.hasSys[p] = v, !v.IsNull()
}

func (m *testMessage) setSys(p SystemProperty, v Value) *testMessage {
	m.SetSystem(p, v)
	return m
}

var enqueued = time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)

// sampleMessage has a little of everything.
func sampleMessage() *testMessage {
	m := &testMessage{user: map[string]Value{
		"color":    StringValue("red"),
		"Color":    StringValue("blue"),
		"quantity": IntValue(12),
		"price":    FloatValue(2.5),
		"priority": IntValue(-3),
		"urgent":   BoolValue(true),
		"blob":     BytesValue([]byte{1, 2, 3}),
		"when":     TimeValue(enqueued),
		"my prop":  StringValue("spaced"),
		"empty":    StringValue(""),
		"pattern":  StringValue("50% off_now"),
		"big":      IntValue(9223372036854775807),
		"zero":     IntValue(0),
		"name":     StringValue("Ünïcødé"),
	}}
	m.setSys(SysMessageID, StringValue("msg-1")).
		setSys(SysLabel, StringValue("order.created")).
		setSys(SysTo, StringValue("warehouse")).
		setSys(SysContentType, StringValue("application/json")).
		setSys(SysSessionID, StringValue("session-7")).
		setSys(SysSequenceNumber, IntValue(42)).
		setSys(SysEnqueuedTimeUtc, TimeValue(enqueued)).
		setSys(SysTimeToLive, DurationValue(90*time.Second)).
		setSys(SysDeliveryCount, IntValue(1)).
		setSys(SysSize, IntValue(256))
	return m
}
