package engine

import (
	"cmp"
	"slices"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A BodyRef is where a stored message's body lies outside the engine:
// bytes Offset to Offset+Length of the data of log entry Index, the entry
// that sent the message. The engine keeps the reference in place of the
// body, so that what a partition holds in memory follows the number of
// its messages, not their bytes; whoever hands a message out reads the
// body back (see PendingBody). A zero Length means the body is held in
// memory.
type BodyRef struct {
	Index          uint64
	Offset, Length uint32
}

func (r BodyRef) onDisk() bool { return r.Length > 0 }

func bodyRefOf(s *enginev1.BodyRef) BodyRef {
	return BodyRef{Index: s.GetIndex(), Offset: s.GetOffset(), Length: s.GetLength()}
}

func (r BodyRef) stored() *enginev1.BodyRef {
	return &enginev1.BodyRef{Index: r.Index, Offset: r.Offset, Length: r.Length}
}

// A PendingBody is a message the engine handed out without its body:
// the caller must set Message.Body to the bytes Ref points to before the
// message leaves the partition.
type PendingBody struct {
	Message *raftbusv1.Message
	Ref     BodyRef
}

// TakeBodies returns the messages handed out since the last call (by
// Apply, Peek, PeekSession or TransfersTo) whose bodies are still to be
// read, and forgets them.
func (e *Engine) TakeBodies() []PendingBody {
	out := e.pending
	e.pending = nil
	return out
}

// handOut notes that msg, handed out, takes the body of m.
func (e *Engine) handOut(msg *raftbusv1.Message, m *message) {
	msg.Body = m.body
	if m.ref.onDisk() {
		e.pending = append(e.pending, PendingBody{Message: msg, Ref: m.ref})
	}
}

// OldestBodyRef is the lowest log index a body reference of the state
// points into (0: none): the log must keep that entry and every later one.
func (e *Engine) OldestBodyRef() uint64 { return e.pins.oldest() }

// bodyPins counts the body references into each log index. References
// come in log order (a command's messages are stored as it applies), so
// the counts are runs sorted by index; an index whose count falls to
// zero leaves them once every lower one has.
type bodyPins struct {
	runs []pinRun
	head int
}

type pinRun struct {
	index uint64
	n     int64
}

func (p *bodyPins) add(r BodyRef) {
	if !r.onDisk() {
		return
	}
	live := p.runs[p.head:]
	if n := len(live); n > 0 && live[n-1].index == r.Index {
		live[n-1].n++
		return
	} else if n == 0 || live[n-1].index < r.Index {
		p.runs = append(p.runs, pinRun{index: r.Index, n: 1})
		return
	}
	// Out of order: a restore or a receipt of older messages.
	i, found := slices.BinarySearchFunc(live, r.Index, func(x pinRun, idx uint64) int { return cmp.Compare(x.index, idx) })
	if found {
		live[i].n++
		return
	}
	p.runs = slices.Insert(p.runs, p.head+i, pinRun{index: r.Index, n: 1})
}

func (p *bodyPins) remove(r BodyRef) {
	if !r.onDisk() {
		return
	}
	live := p.runs[p.head:]
	i, found := slices.BinarySearchFunc(live, r.Index, func(x pinRun, idx uint64) int { return cmp.Compare(x.index, idx) })
	if !found || live[i].n <= 0 {
		return
	}
	live[i].n--
	for p.head < len(p.runs) && p.runs[p.head].n == 0 {
		p.head++
	}
	if p.head == len(p.runs) {
		p.runs, p.head = p.runs[:0], 0
	} else if p.head > 64 && p.head*2 > len(p.runs) {
		n := copy(p.runs, p.runs[p.head:])
		p.runs, p.head = p.runs[:n], 0
	}
}

func (p *bodyPins) oldest() uint64 {
	if p == nil || p.head == len(p.runs) {
		return 0
	}
	return p.runs[p.head].index
}
