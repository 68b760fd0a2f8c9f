package servicebus

import (
	"sync"
	"time"

	"github.com/raftbus/raftbus/client"
)

// locks are the messages handed out locked through this node's AMQP
// listener, by lock token, and what settles each. They are shared by all
// connections, as a lock in Service Bus belongs to the entity and not to
// a connection: an SDK that reconnected settles on its new connection
// (through the $management node) what it received on the old one.
type locks struct {
	mu      sync.Mutex
	byToken map[[16]byte]*lock
	inserts int
}

// lock is a locked message and the receiver that settles it.
type lock struct {
	msg *client.ReceivedMessage
	rcv *client.Receiver
	// entity is where the message was received from: settling or
	// renewing it needs the Listen right there.
	entity entity
}

// pruneEvery and pruneAfter bound the registry: every pruneEvery locks
// kept, those whose lock ended pruneAfter ago go (their messages went
// back to the entity or on; the broker answers a late settlement of one
// as a lost lock anyway).
const (
	pruneEvery = 256
	pruneAfter = time.Minute
)

func (ls *locks) add(e entity, rcv *client.Receiver, m *client.ReceivedMessage) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.byToken == nil {
		ls.byToken = map[[16]byte]*lock{}
	}
	ls.byToken[m.LockToken] = &lock{msg: m, rcv: rcv, entity: e}
	ls.inserts++
	if ls.inserts%pruneEvery == 0 {
		cutoff := time.Now().Add(-pruneAfter)
		for t, lk := range ls.byToken {
			if lk.msg.LockedUntil.Before(cutoff) {
				delete(ls.byToken, t)
			}
		}
	}
}

func (ls *locks) get(token [16]byte) *lock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.byToken[token]
}

func (ls *locks) remove(token [16]byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.byToken, token)
}
