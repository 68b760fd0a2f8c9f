package sqlfilter

import (
	"sort"
	"strconv"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// CorrelationFilter is a compiled correlation filter: it matches a message
// when every field it sets equals the message's. System fields compare as
// exact (case-sensitive) strings; application properties by typed equality
// (Value.Equal: same kind and value, so int 5 does not equal 5.0). A filter
// that sets nothing matches every message. It is immutable and safe for
// concurrent use.
type CorrelationFilter struct {
	system []sysCondition
	user   []userCondition // sorted by name, for a deterministic order
}

type sysCondition struct {
	p    SystemProperty
	want string
}

type userCondition struct {
	name string
	want Value
}

// NewCorrelationFilter compiles f. It fails when an application property
// has no value, since such a condition could never be written as a
// property of a message.
func NewCorrelationFilter(f *raftbusv1.CorrelationFilter) (*CorrelationFilter, error) {
	c := &CorrelationFilter{}
	for _, field := range []struct {
		p SystemProperty
		v string
	}{
		{SysCorrelationID, f.GetCorrelationId()},
		{SysMessageID, f.GetMessageId()},
		{SysTo, f.GetTo()},
		{SysReplyTo, f.GetReplyTo()},
		{SysLabel, f.GetSubject()},
		{SysSessionID, f.GetSessionId()},
		{SysReplyToSessionID, f.GetReplyToSessionId()},
		{SysContentType, f.GetContentType()},
	} {
		if field.v != "" {
			c.system = append(c.system, sysCondition{p: field.p, want: field.v})
		}
	}
	props := f.GetApplicationProperties()
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := ValueOf(props[name])
		if v.IsNull() {
			return nil, &CorrelationError{Property: name}
		}
		c.user = append(c.user, userCondition{name: name, want: v})
	}
	return c, nil
}

// CorrelationError reports an application property of a correlation filter
// that has no value.
type CorrelationError struct {
	Property string
}

func (e *CorrelationError) Error() string {
	return "correlation filter: application property " + strconv.Quote(e.Property) + " has no value"
}

// Match reports whether m has every property the filter sets, with equal
// values.
func (c *CorrelationFilter) Match(m Message) bool {
	for _, cond := range c.system {
		v, ok := m.System(cond.p)
		if !ok || v.kind != KindString || v.s != cond.want {
			return false
		}
	}
	for _, cond := range c.user {
		v, ok := m.User(cond.name)
		if !ok || !v.Equal(cond.want) {
			return false
		}
	}
	return true
}
