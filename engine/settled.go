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
// tokens were settled and how: a repeat of the same settlement succeeds
// and changes nothing. Any other use of the token still finds the lock
// lost.
const (
	// maxSettledKept bounds the settlements one partition remembers;
	// beyond it the oldest are forgotten first (a repeat after that
	// finds the lock lost, as it would without this memory). At the
	// highest settlement rates of one partition this still covers the
	// seconds a leader election and the repeat take.
	maxSettledKept = 1 << 16
)

// settledLock is one remembered settlement.
type settledLock struct {
	token       lockToken
	path        string
	sub         raftbusv1.SubQueue
	disposition enginev1.Disposition
	expiresMs   int64
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

// repeats reports whether a settlement of token in path's sub-queue by
// disposition repeats one made before now.
func (t *settledTable) repeats(path string, sub raftbusv1.SubQueue, token lockToken, disposition enginev1.Disposition, now int64) bool {
	pos, ok := t.byToken[token]
	if !ok {
		return false
	}
	s := &t.fifo[pos-t.base]
	return s.expiresMs > now && s.path == path && s.sub == sub && s.disposition == disposition
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
	if e.version < versionSettlementsRepeatable {
		return
	}
	e.settled.add(settledLock{
		token: token, path: q.entity.path, sub: c.GetSubQueue(),
		disposition: c.GetDisposition(), expiresMs: addMs(now, e.receiptWindow(q)),
	})
}

// repeatsSettlement reports whether c repeats a settlement of token that
// took effect.
func (e *Engine) repeatsSettlement(now int64, q *queue, c *enginev1.Settle, token lockToken) bool {
	return e.version >= versionSettlementsRepeatable &&
		e.settled.repeats(q.entity.path, c.GetSubQueue(), token, c.GetDisposition(), now)
}

func storedSettled(s settledLock) *enginev1.SettledLock {
	return &enginev1.SettledLock{
		EntityPath: s.path, SubQueue: s.sub, LockToken: s.token[:],
		Disposition: s.disposition, ExpiresUnixMs: s.expiresMs,
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
	e.settled.add(settledLock{
		token: tok, path: s.GetEntityPath(), sub: s.GetSubQueue(),
		disposition: s.GetDisposition(), expiresMs: s.GetExpiresUnixMs(),
	})
	return nil
}
