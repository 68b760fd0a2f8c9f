package engine

import (
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Settlements are safe to repeat. A settlement whose answer was lost (its
// leader lost leadership while committing it, or the connection broke)
// has an unknown outcome, and the SDK repeats it. Without a memory of it,
// the repeat of one that took effect finds no lock and fails with
// MESSAGE_LOCK_LOST, which the caller cannot tell from a lock that
// expired (the message will come again): the SDK can only report the
// outcome unknown. So the engine remembers, for a while, which lock
// tokens were settled, how and under which settlement id: a repeat of the
// same settlement succeeds and changes nothing. Any other use of the
// token still finds the lock lost.
//
// A repeat is told from a second settlement by the settlement id the
// caller chose for the settlement and kept for its repeats: in Service
// Bus a second Complete of a message already completed fails with
// MessageLockLost, and so does one here that comes with another id or
// none. (Commands of versions before versionSettlementIDs took any
// settlement of a settled token with the same disposition for a repeat,
// and replay so; from that version a settlement without an id is never
// taken for a repeat, and none is remembered.)
const (
	// maxSettledKept bounds the settlements one partition remembers;
	// beyond it the oldest are forgotten first (a repeat after that
	// finds the lock lost, as it would without this memory). At the
	// highest settlement rates of one partition this still covers the
	// seconds a leader election and the repeat take.
	maxSettledKept = 1 << 16
	// maxSettlementIDSize bounds a settlement id.
	maxSettlementIDSize = 64
)

// settledLock is one remembered settlement.
type settledLock struct {
	token       lockToken
	path        string
	sub         raftbusv1.SubQueue
	disposition enginev1.Disposition
	expiresMs   int64
	// id is the settlement id it was made with (empty: none).
	id string
}

// settledTable holds the settlements of one partition in the order they
// were made. As with receipts, expiry times never decrease along that
// order, so what is forgotten is always a prefix and replicas and
// snapshots stay in step whatever Ticks ran.
type settledTable struct {
	// byToken gives each settlement kept its position in the order: the
	// count of settlements added before it. fifo[i] is at position
	// base+i, so moving fifo's live part to its front (compact) changes
	// base, not the map (re-indexing the 64 Ki kept each time cost a
	// second map write per settlement).
	byToken map[lockToken]int
	fifo    []settledLock
	base    int
	head    int
}

func newSettledTable() settledTable {
	return settledTable{byToken: make(map[lockToken]int)}
}

// find returns the settlement of token kept at now, if any.
func (t *settledTable) find(token lockToken, now int64) (*settledLock, bool) {
	pos, ok := t.byToken[token]
	if !ok {
		return nil, false
	}
	s := &t.fifo[pos-t.base]
	return s, s.expiresMs > now
}

// add remembers s, expiring no earlier than the newest settlement kept,
// and forgets the oldest beyond maxSettledKept.
func (t *settledTable) add(s settledLock) {
	if n := len(t.fifo); n > t.head {
		s.expiresMs = max(s.expiresMs, t.fifo[n-1].expiresMs)
	}
	if t.head > 1024 && t.head*2 > len(t.fifo) {
		t.compact()
	}
	t.byToken[s.token] = t.base + len(t.fifo)
	t.fifo = append(t.fifo, s)
	for len(t.fifo)-t.head > maxSettledKept {
		t.pop()
	}
}

// prune forgets the settlements expired at now.
func (t *settledTable) prune(now int64) {
	for t.head < len(t.fifo) && t.fifo[t.head].expiresMs <= now {
		t.pop()
	}
	if t.head == len(t.fifo) {
		t.base += t.head
		t.fifo, t.head = t.fifo[:0], 0
	}
}

func (t *settledTable) pop() {
	s := &t.fifo[t.head]
	if pos, ok := t.byToken[s.token]; ok && pos == t.base+t.head {
		delete(t.byToken, s.token)
	}
	*s = settledLock{}
	t.head++
}

// compact moves the live settlements to the front of fifo.
func (t *settledTable) compact() {
	n := copy(t.fifo, t.fifo[t.head:])
	clear(t.fifo[n:])
	t.fifo = t.fifo[:n]
	t.base += t.head
	t.head = 0
}

// last is when the newest settlement kept expires, if any is kept.
func (t *settledTable) last() (int64, bool) {
	if n := len(t.fifo); n > t.head {
		return t.fifo[n-1].expiresMs, true
	}
	return 0, false
}

// live returns the settlements kept, oldest first.
func (t *settledTable) live() []settledLock { return t.fifo[t.head:] }

// rememberSettled keeps the settlement c of token in q made at now.
func (e *Engine) rememberSettled(now int64, q *queue, c *enginev1.Settle, token lockToken) {
	var id string
	switch {
	case e.version < versionSettlementsRepeatable:
		return
	case e.version >= versionSettlementIDs:
		if len(c.GetSettlementId()) == 0 {
			return // nothing could repeat it
		}
		id = string(c.GetSettlementId())
	}
	e.settled.add(settledLock{
		token: token, path: q.entity.path, sub: c.GetSubQueue(),
		disposition: c.GetDisposition(), expiresMs: addMs(now, e.receiptWindow(q)), id: id,
	})
}

// repeatsSettlement reports whether c repeats a settlement of token that
// took effect.
func (e *Engine) repeatsSettlement(now int64, q *queue, c *enginev1.Settle, token lockToken) bool {
	if e.version < versionSettlementsRepeatable {
		return false
	}
	s, ok := e.settled.find(token, now)
	if !ok || s.path != q.entity.path || s.sub != c.GetSubQueue() || s.disposition != c.GetDisposition() {
		return false
	}
	if e.version < versionSettlementIDs {
		return true
	}
	return s.id != "" && s.id == string(c.GetSettlementId())
}

func storedSettled(s settledLock) *enginev1.SettledLock {
	return &enginev1.SettledLock{
		EntityPath: s.path, SubQueue: s.sub, LockToken: s.token[:],
		Disposition: s.disposition, ExpiresUnixMs: s.expiresMs,
		SettlementId: []byte(s.id),
	}
}

func (e *Engine) restoreSettled(s *enginev1.SettledLock) *Error {
	if err := checkPath(s.GetEntityPath()); err != nil {
		return err
	}
	if n := len(s.GetLockToken()); n != len(lockToken{}) {
		return invalidf("lock token of %d bytes", n)
	}
	if _, ok := enginev1.Disposition_name[int32(s.GetDisposition())]; !ok || s.GetDisposition() == enginev1.Disposition_DISPOSITION_UNSPECIFIED {
		return invalidf("disposition %d", s.GetDisposition())
	}
	if last, ok := e.settled.last(); ok && last > s.GetExpiresUnixMs() {
		return invalidf("settlements out of order")
	}
	if s.GetExpiresUnixMs() <= e.now {
		return invalidf("an expired settlement")
	}
	tok := lockToken(s.GetLockToken())
	if _, ok := e.settled.byToken[tok]; ok {
		return invalidf("lock token %x settled twice", tok[:])
	}
	if len(e.settled.live()) >= maxSettledKept {
		return invalidf("more than %d settlements", maxSettledKept)
	}
	if err := checkSettlementID(s.GetSettlementId()); err != nil {
		return err
	}
	e.settled.add(settledLock{
		token: tok, path: s.GetEntityPath(), sub: s.GetSubQueue(),
		disposition: s.GetDisposition(), expiresMs: s.GetExpiresUnixMs(),
		id: string(s.GetSettlementId()),
	})
	return nil
}
