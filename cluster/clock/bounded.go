package clock

import (
	"errors"
	"sync"
	"time"
)

// ErrUntrusted is wrapped by the errors of Bounded.Now while the node's
// clock is not trusted.
var ErrUntrusted = errors.New("this node's clock is not trusted")

// Bounded is the time a leader stamps into commands. It follows the wall
// clock, but never runs ahead of the last reading peers vouched for plus
// what the monotonic clock has seen since: a wall clock stepped forward
// between two checks moves stamps by no more than real time elapsed, and
// the next check finds it out. Until peers vouch for the clock, and while
// they do not, it gives no time at all.
type Bounded struct {
	src Source

	mu         sync.Mutex
	trusted    bool
	why        string
	anchorWall time.Time
	anchorMono time.Duration
}

// NewBounded returns a Bounded over src, not yet trusted.
func NewBounded(src Source) *Bounded {
	return &Bounded{src: src, why: "not yet compared with the other nodes' clocks"}
}

// Vouch records that peers found the wall clock right when it read wall,
// at mono on the monotonic clock. Stamps may then follow the wall clock,
// up to wall plus the monotonic time elapsed since.
func (b *Bounded) Vouch(wall time.Time, mono time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trusted, b.why = true, ""
	b.anchorWall, b.anchorMono = wall, mono
}

// Distrust stops stamping: why says what is wrong with the clock.
func (b *Bounded) Distrust(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trusted, b.why = false, why
}

// Trusted reports whether Now gives a time, and if not, why.
func (b *Bounded) Trusted() (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.trusted, b.why
}

// Now is the wall clock, but at most the last vouched-for reading plus
// the monotonic time since; an error wrapping ErrUntrusted while the
// clock is not trusted.
func (b *Bounded) Now() (time.Time, error) {
	wall, mono := b.src.Now(), b.src.Monotonic()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.trusted {
		return time.Time{}, &untrustedError{why: b.why}
	}
	ceiling := b.anchorWall.Add(mono - b.anchorMono)
	if wall.After(ceiling) {
		return ceiling, nil
	}
	return wall, nil
}

type untrustedError struct{ why string }

func (e *untrustedError) Error() string { return ErrUntrusted.Error() + ": " + e.why }
func (e *untrustedError) Unwrap() error { return ErrUntrusted }
