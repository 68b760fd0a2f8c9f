package engine

import "strings"

// indexedHeap is a min-heap in which every item records its own position
// (through K), which makes removal and re-keying O(log n). K also orders
// the items, and every order breaks ties by something unique (a message's
// order, a session's id), so that the heap never depends on insertion
// order.
type indexedHeap[T any, K heapKey[T]] struct {
	items []T
}

// heapKey orders the items of a heap and names the field where each keeps
// its position (-1 outside the heap).
type heapKey[T any] interface {
	less(a, b T) bool
	index(a T) *int32
}

// byDeadline orders messages by a deadline, ties by the order sequence
// numbers were handed out in.
func byDeadline(da, db int64, a, b *message) bool {
	return da < db || (da == db && a.order < b.order)
}

// timerKey orders by dueMs: lock expiry of locked messages, activation
// time of scheduled ones.
type timerKey struct{}

func (timerKey) less(a, b *message) bool { return byDeadline(a.dueMs, b.dueMs, a, b) }
func (timerKey) index(m *message) *int32 { return &m.timerIdx }

// returnedKey orders available messages back from a lock by order alone.
// It shares the position field with timerKey: a message is never locked
// or scheduled and available at once.
type returnedKey struct{}

func (returnedKey) less(a, b *message) bool { return a.order < b.order }
func (returnedKey) index(m *message) *int32 { return &m.timerIdx }

// expiryKey orders by expiresMs (time to live).
type expiryKey struct{}

func (expiryKey) less(a, b *message) bool { return byDeadline(a.expiresMs, b.expiresMs, a, b) }
func (expiryKey) index(m *message) *int32 { return &m.expiryIdx }

// sessionLockKey orders held sessions by lock expiry, ties by id.
type sessionLockKey struct{}

func (sessionLockKey) less(a, b *session) bool {
	return a.lockedUntil < b.lockedUntil || (a.lockedUntil == b.lockedUntil && strings.Compare(a.id, b.id) < 0)
}
func (sessionLockKey) index(s *session) *int32 { return &s.lockIdx }

// sessionReadyKey orders sessions by the order of their head message.
type sessionReadyKey struct{}

func (sessionReadyKey) less(a, b *session) bool {
	return a.active.first().order < b.active.first().order
}
func (sessionReadyKey) index(s *session) *int32 { return &s.readyIdx }

func (h *indexedHeap[T, K]) Len() int { return len(h.items) }

// top returns the least item, or the zero T (nil) when empty.
func (h *indexedHeap[T, K]) top() T {
	if len(h.items) == 0 {
		var zero T
		return zero
	}
	return h.items[0]
}

func (h *indexedHeap[T, K]) contains(x T) bool {
	var k K
	return *k.index(x) >= 0
}

func (h *indexedHeap[T, K]) push(x T) {
	var k K
	*k.index(x) = int32(len(h.items))
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

func (h *indexedHeap[T, K]) remove(x T) {
	var k K
	i := int(*k.index(x))
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	*k.index(x) = -1
	if i != last {
		h.fix(i)
	}
}

// changed restores the heap order after x's key changed.
func (h *indexedHeap[T, K]) changed(x T) {
	var k K
	if i := int(*k.index(x)); i >= 0 {
		h.fix(i)
	}
}

func (h *indexedHeap[T, K]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *indexedHeap[T, K]) less(i, j int) bool {
	var k K
	return k.less(h.items[i], h.items[j])
}

func (h *indexedHeap[T, K]) swap(i, j int) {
	var k K
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*k.index(h.items[i]) = int32(i)
	*k.index(h.items[j]) = int32(j)
}

func (h *indexedHeap[T, K]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *indexedHeap[T, K]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
