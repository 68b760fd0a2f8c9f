package engine

// Receive budgets. A receive (Lock), a ReceiveDeferred and a peek stop
// adding messages once the next one would take their answer past a number
// of bytes the caller chooses (max_bytes of the command): up to 1000
// messages of up to 1 MiB each would not fit in the gRPC message that
// carries them, and messages locked or removed for an answer that cannot
// be delivered are as good as lost. The first message is always taken, so
// that a receive of one large message makes progress. Sizes are counted
// from the stored message, before it is taken, so that the engine knows
// whether a message fits before it locks or removes it.

// receivedOverhead bounds what a handed-out message adds to its id, body,
// meta and dead-letter strings once encoded as a raftbus.v1.ReceivedMessage
// in a repeated field of an answer: the field's tag and length (6 bytes),
// the inner Message's tag and length and those of its id and body (18),
// sequence numbers and delivery count (33), three timestamps (57), the
// lock token (18), state and partition id (17) and the tags and lengths of
// the dead-letter strings (18): 167 bytes at most, rounded up.
const receivedOverhead = 192

// receivedSize bounds the encoded size of m as handed out, in an answer.
func (m *message) receivedSize() int64 {
	n := m.size() + receivedOverhead
	if dl := m.deadLetter; dl != nil {
		n += int64(len(dl.reason) + len(dl.description) + len(dl.source))
	}
	return n
}

// byteBudget counts the bytes of an answer against its limit.
type byteBudget struct {
	left  int64
	limit bool // false: no limit
	taken bool
}

// newByteBudget is a budget of max bytes; zero or less is no limit.
func newByteBudget(max int64) byteBudget {
	return byteBudget{left: max, limit: max > 0}
}

// take reports whether m fits in what is left, and counts it if so. The
// first message always fits.
func (b *byteBudget) take(m *message) bool {
	n := m.receivedSize()
	if b.limit && b.taken && n > b.left {
		return false
	}
	b.taken = true
	b.left -= n
	return true
}
