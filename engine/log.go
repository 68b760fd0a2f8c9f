package engine

import (
	"slices"
	"sort"
)

// messageLog holds messages in the order their sequence numbers were handed
// out. Almost every insertion into a queue carries the newest order of the
// partition, so the log appends; removal leaves a hole that is skipped,
// and holes are compacted away once they outnumber the messages. Lookups
// are binary searches. Unlike a balanced tree, removal from the front
// moves nothing, which is the common case of a queue. Only a dead-lettered
// message, which keeps its number, can belong before others (see insert).
type messageLog struct {
	slots []logSlot
	head  int // slots before head are holes
	live  int
}

type logSlot struct {
	order uint64
	m     *message // nil: removed
}

func (l *messageLog) Len() int { return l.live }

// append adds m, whose order must be above every order in the log.
func (l *messageLog) append(m *message) {
	l.slots = append(l.slots, logSlot{m.order, m})
	l.live++
}

// insert adds m in its place by order, which no message of the log has.
// Past the last order it appends. Before it, m takes the hole just before
// its place when there is one (a dead-letter sub-queue received from the
// front has them), else the slots after its place move up one: a
// dead-letter sub-queue mostly takes messages in about the order they were
// sent, so few of them move.
func (l *messageLog) insert(m *message) {
	if len(l.slots) == 0 || m.order > l.lastOrder() {
		l.append(m)
		return
	}
	i := l.search(m.order)
	switch {
	case i > l.head && l.slots[i-1].m == nil:
		l.slots[i-1] = logSlot{m.order, m}
	case i == l.head && l.head > 0:
		l.head--
		l.slots[l.head] = logSlot{m.order, m}
	default:
		l.slots = slices.Insert(l.slots, i, logSlot{m.order, m})
	}
	l.live++
}

// lastOrder is the order of the last slot, live or not (0 when empty).
func (l *messageLog) lastOrder() uint64 {
	if len(l.slots) == 0 {
		return 0
	}
	return l.slots[len(l.slots)-1].order
}

// search returns the index of the first slot with order >= order.
func (l *messageLog) search(order uint64) int {
	s := l.slots[l.head:]
	return l.head + sort.Search(len(s), func(i int) bool { return s[i].order >= order })
}

// get returns the message with this order, or nil.
func (l *messageLog) get(order uint64) *message {
	i := l.search(order)
	if i < len(l.slots) && l.slots[i].order == order {
		return l.slots[i].m
	}
	return nil
}

// remove takes m out of the log; it reports whether m was there.
func (l *messageLog) remove(m *message) bool {
	i := l.search(m.order)
	if i >= len(l.slots) || l.slots[i].m != m {
		return false
	}
	l.slots[i].m = nil
	l.live--
	for l.head < len(l.slots) && l.slots[l.head].m == nil {
		l.slots[l.head] = logSlot{}
		l.head++
	}
	if holes := len(l.slots) - l.live; holes > 32 && holes > l.live {
		l.compact()
	}
	return true
}

func (l *messageLog) compact() {
	n := 0
	for _, s := range l.slots[l.head:] {
		if s.m != nil {
			l.slots[n] = s
			n++
		}
	}
	clear(l.slots[n:])
	l.slots = l.slots[:n]
	l.head = 0
	if cap(l.slots) > 64 && cap(l.slots) > 4*n {
		l.slots = append([]logSlot(nil), l.slots...)
	}
}

// first returns the live message with the lowest order, or nil.
func (l *messageLog) first() *message {
	if l.head < len(l.slots) {
		return l.slots[l.head].m
	}
	return nil
}

// ascend calls f for live messages with order >= from, in order, until f
// returns false.
func (l *messageLog) ascend(from uint64, f func(*message) bool) {
	for i := l.search(from); i < len(l.slots); i++ {
		if m := l.slots[i].m; m != nil && !f(m) {
			return
		}
	}
}
