package clock

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Source reads a node's clocks. Every wall-clock reading a node makes goes
// through its Source.
type Source interface {
	// Now is the wall-clock time, without a monotonic reading (so that
	// differences between readings are wall-clock differences).
	Now() time.Time
	// Monotonic is the time elapsed on a clock that only moves forward at
	// a steady rate (it ignores steps of the wall clock), from an origin
	// of the Source's choosing.
	Monotonic() time.Duration
}

// FaultOffsetEnv names the environment variable raftbusd reads an offset
// for System from at start (a Go duration such as "11m" or "-3s"). It
// exists for fault injection, to skew one node of a test cluster; it is
// not a setting for production use.
const FaultOffsetEnv = "RAFTBUS_FAULT_CLOCK_OFFSET"

// FaultOffset parses the value of FaultOffsetEnv ("" is no offset).
func FaultOffset(value string) (time.Duration, error) {
	if value == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", FaultOffsetEnv, err)
	}
	return d, nil
}

// System is the machine's clock with an offset added to every wall-clock
// reading. The offset exists for fault injection: it makes one node's
// clock run ahead of or behind its peers' without touching the machine's
// (Linux time namespaces cannot offset CLOCK_REALTIME). It is zero unless
// a test sets it. The monotonic clock is not offset.
type System struct {
	origin time.Time
	offset atomic.Int64
}

// NewSystem returns the machine's clock, offset by offset.
func NewSystem(offset time.Duration) *System {
	s := &System{origin: time.Now()}
	s.offset.Store(int64(offset))
	return s
}

// Now is the machine's wall clock plus the offset.
func (s *System) Now() time.Time {
	return time.Now().Add(time.Duration(s.offset.Load())).Round(0)
}

// Monotonic is the time since NewSystem on the machine's monotonic clock.
func (s *System) Monotonic() time.Duration { return time.Since(s.origin) }

// SetOffset changes the offset: the wall clock steps at once, as a clock
// stepped by hand or by a broken time daemon would. For fault injection.
func (s *System) SetOffset(d time.Duration) { s.offset.Store(int64(d)) }

// Offset is the current offset.
func (s *System) Offset() time.Duration { return time.Duration(s.offset.Load()) }
