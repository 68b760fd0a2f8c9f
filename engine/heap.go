package engine

// deadlineHeap is an indexed min-heap of messages ordered by a deadline, ties
// broken by the order sequence numbers were handed out in, so that the heap's
// behaviour never depends on insertion order. Each message records its own
// position (through F), which makes removal and re-keying O(log n).
type deadlineHeap[F heapField] struct {
	items []*message
}

// heapField selects which deadline and which position field a heap uses.
type heapField interface {
	deadline(m *message) int64
	index(m *message) *int32
}

// timerField orders by dueMs: lock expiry of locked messages, activation
// time of scheduled ones.
type timerField struct{}

func (timerField) deadline(m *message) int64 { return m.dueMs }
func (timerField) index(m *message) *int32   { return &m.timerIdx }

// returnedField orders available messages back from a lock by order
// alone. It shares the position field with timerField: a message is never
// locked or scheduled and available at once.
type returnedField struct{}

func (returnedField) deadline(*message) int64 { return 0 }
func (returnedField) index(m *message) *int32 { return &m.timerIdx }

// expiryField orders by expiresMs (time to live).
type expiryField struct{}

func (expiryField) deadline(m *message) int64 { return m.expiresMs }
func (expiryField) index(m *message) *int32   { return &m.expiryIdx }

func (h *deadlineHeap[F]) Len() int { return len(h.items) }

// top returns the message with the earliest deadline, or nil.
func (h *deadlineHeap[F]) top() *message {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *deadlineHeap[F]) contains(m *message) bool {
	var f F
	return *f.index(m) >= 0
}

func (h *deadlineHeap[F]) push(m *message) {
	var f F
	*f.index(m) = int32(len(h.items))
	h.items = append(h.items, m)
	h.up(len(h.items) - 1)
}

func (h *deadlineHeap[F]) remove(m *message) {
	var f F
	i := int(*f.index(m))
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	*f.index(m) = -1
	if i != last {
		h.fix(i)
	}
}

// changed restores the heap order after m's deadline changed.
func (h *deadlineHeap[F]) changed(m *message) {
	var f F
	if i := int(*f.index(m)); i >= 0 {
		h.fix(i)
	}
}

func (h *deadlineHeap[F]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *deadlineHeap[F]) less(i, j int) bool {
	var f F
	a, b := h.items[i], h.items[j]
	da, db := f.deadline(a), f.deadline(b)
	return da < db || (da == db && a.order < b.order)
}

func (h *deadlineHeap[F]) swap(i, j int) {
	var f F
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*f.index(h.items[i]) = int32(i)
	*f.index(h.items[j]) = int32(j)
}

func (h *deadlineHeap[F]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *deadlineHeap[F]) down(i0 int) bool {
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
