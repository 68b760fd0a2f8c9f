package engine

// Counters count what happened to an entity's messages in this partition
// since this engine was created or restored from a snapshot. They are not
// state: no snapshot or digest holds them and no command reads them, so
// replicas that restarted at different points count differently while
// their state agrees. Every replica counts the entries it applies, in the
// same deterministic way as the rest of Apply; what to report, and from
// which replica, is for the layers above (metrics report the leader's).
type Counters struct {
	// Sent counts messages accepted by a send or a schedule (not
	// duplicates); a topic counts what was sent to it, not the copies its
	// subscriptions got.
	Sent uint64
	// Duplicates counts messages dropped by duplicate detection.
	Duplicates uint64
	// Received counts messages handed to receivers: locked (peek-lock,
	// deferred by sequence number) or removed (receive-and-delete), from
	// the entity or its dead-letter sub-queue.
	Received uint64
	// Completed, Abandoned and Deferred count settlements.
	Completed uint64
	Abandoned uint64
	Deferred  uint64
	// DeadLettered counts every move to the dead-letter sub-queue: asked
	// for by a receiver, MaxDeliveryCount used up, or an expiry on an
	// entity that dead-letters expired messages.
	DeadLettered uint64
	// Expired counts messages whose time to live ended (dropped or
	// dead-lettered).
	Expired uint64
	// Forwarded counts messages put in transfer to a forwarding target
	// (see transfer.go).
	Forwarded uint64
}

// EachCounters calls fn with every entity's counters in this partition, in
// path order. Callers hold the engine's lock as for any read.
func (e *Engine) EachCounters(fn func(path string, c Counters)) {
	for _, ent := range e.sorted {
		fn(ent.path, ent.counters)
	}
}
