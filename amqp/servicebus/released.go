package servicebus

import (
	"sync"
	"time"

	"github.com/raftbus/raftbus/client"
)

// releasedHold is how close to the end of its lock a released message is
// given back to the entity rather than kept for the link.
const releasedHold = 5 * time.Second

// releasedMessages are the messages an SDK released on one receiver link:
// deliveries it had no use for, because they arrived after its
// ReceiveMessages call had returned (the Go SDK releases whatever its
// leftover credit brings in between calls). Service Bus does not count
// such a delivery. The broker counts every lock, so abandoning them would
// raise their delivery count each time and dead-letter a message no one
// ever looked at; instead the link keeps them locked and hands them out
// again first at its next credit. One whose lock is about to end is
// abandoned then: it goes back to the entity, counted once.
type releasedMessages struct {
	mu    sync.Mutex
	msgs  []*client.ReceivedMessage
	added chan struct{} // closed and replaced when a message is added
}

func newReleasedMessages() *releasedMessages {
	return &releasedMessages{added: make(chan struct{})}
}

func (r *releasedMessages) add(m *client.ReceivedMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	close(r.added)
	r.added = make(chan struct{})
}

// wait returns a channel closed at the next add.
func (r *releasedMessages) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.added
}

// take removes up to n messages to hand out again, and every message
// whose lock ends within releasedHold of now, to abandon.
func (r *releasedMessages) take(n int, now time.Time) (again, expiring []*client.ReceivedMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.msgs[:0]
	for _, m := range r.msgs {
		switch {
		case m.LockedUntil.Sub(now) < releasedHold:
			expiring = append(expiring, m)
		case len(again) < n:
			again = append(again, m)
		default:
			kept = append(kept, m)
		}
	}
	clear(r.msgs[len(kept):])
	r.msgs = kept
	return again, expiring
}

// next is when the first kept message must be abandoned (zero: none).
func (r *releasedMessages) next() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	for _, m := range r.msgs {
		if t := m.LockedUntil.Add(-releasedHold); first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// all removes every message, for a link that ended.
func (r *releasedMessages) all() []*client.ReceivedMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	msgs := r.msgs
	r.msgs = nil
	return msgs
}
