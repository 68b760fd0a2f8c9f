package engine

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Auto-forwarding moves a message from one entity to another, which lives
// in another Raft group, exactly once. The source does not let go of the
// message until the target has durably accepted it:
//
//  1. A message accepted by an entity with forward_to (or dead-lettered
//     in one with forward_dead_lettered_messages_to) is stored in the
//     transfer state instead: no receiver and no peek sees it, the
//     runtime properties count it, and it takes the next number of the
//     partition's stream of transfers (one counter per engine).
//  2. The forwarder on the source's leader (cluster/forwarder.go) reads
//     the transfers (Transfers) and sends them, in increasing number per
//     target partition, as AcceptTransfer commands to the target's
//     partitions, under the source's stream name.
//  3. The target's entity remembers the highest number of each stream it
//     accepted: a repeat (an answer lost, a new source leader starting
//     over) is answered as a duplicate and enqueued nothing. Because a
//     stream's numbers reach each target partition in increasing order,
//     one number per stream is all the memory this takes, and snapshots
//     keep it. A stream whose source is deleted is forgotten (see
//     transfermarks.go), so that the marks stay as many as the sources.
//  4. Once answered, the forwarder proposes CompleteTransfer on the
//     source, which removes the messages; a repeat of it changes nothing.
//     A message the target refuses for good leaves the transfer by the
//     same command (see FailedTransfer), before any later message for
//     that target partition is sent: a gap below a stream's mark would
//     pass for accepted.
//
// A message in transfer keeps its target as it was when it entered the
// transfer: a change of forward_to applies to the messages that arrive
// after it.
//
// A deleted target accepts nothing, and the messages bound for it would
// wait in transfer for an entity of its name. Instead they go to the
// source's dead-letter sub-queue (GoneTarget), but only those that no
// forwarder can have delivered: a target that accepted a message, lost
// the answer and was then deleted must not see it dead-lettered too.
// So before it sends, a forwarder claims the numbers it may send
// (TransferClaim, by the same CompleteTransfer command that removes the
// accepted ones when it can); the claim is replicated, so the forwarder
// of a later leader knows which messages an earlier one may have sent,
// and a gone target's dead-lettering spares those, which stay in
// transfer until an entity of its name exists again.

// Application properties a dead-lettered message carries when it is
// forwarded, as in Service Bus.
const (
	DeadLetterReasonProperty           = "DeadLetterReason"
	DeadLetterErrorDescriptionProperty = "DeadLetterErrorDescription"
	// ReasonTransferFailed is the dead-letter reason of a message its
	// forwarding target refused for good.
	ReasonTransferFailed = "TransferFailed"
	maxStreamLength      = 1024
)

// transfer is a message on its way to another entity.
type transfer struct {
	number uint64
	to     string
	q      *queue // where the message is kept meanwhile
	m      *message
}

// transferTable holds the partition's transfers by number, in number
// order, and in number order per target, so that the forwarder takes each
// target's oldest without looking at the others' (one target may be gone
// with many messages waiting for it).
type transferTable struct {
	byNumber  map[uint64]*transfer
	byMessage map[*message]*transfer
	all       numberList
	byTarget  map[string]*numberList
	// claimed is, by target, the highest number a forwarder may have sent
	// it (see TransferClaim); kept while messages are in transfer to it
	// (any later one gets a higher number).
	claimed map[string]uint64
}

// numberList is transfer numbers in ascending order; numbers no longer in
// transfer are skipped and compacted away once they are the most.
type numberList struct {
	numbers []uint64
	live    int
}

func (l *numberList) compact(in map[uint64]*transfer) {
	if len(l.numbers) > 64 && len(l.numbers) > 2*l.live {
		l.numbers = slices.DeleteFunc(l.numbers, func(n uint64) bool { return in[n] == nil })
	}
}

func newTransferTable() transferTable {
	return transferTable{byNumber: make(map[uint64]*transfer), byMessage: make(map[*message]*transfer), byTarget: make(map[string]*numberList),
		claimed: make(map[string]uint64)}
}

func (t *transferTable) add(x *transfer) {
	t.byNumber[x.number] = x
	t.byMessage[x.m] = x
	t.all.numbers = append(t.all.numbers, x.number)
	t.all.live++
	l := t.byTarget[x.to]
	if l == nil {
		l = &numberList{}
		t.byTarget[x.to] = l
	}
	l.numbers = append(l.numbers, x.number)
	l.live++
}

func (t *transferTable) remove(x *transfer) {
	delete(t.byNumber, x.number)
	delete(t.byMessage, x.m)
	t.all.live--
	t.all.compact(t.byNumber)
	l := t.byTarget[x.to]
	if l.live--; l.live == 0 {
		delete(t.byTarget, x.to)
		delete(t.claimed, x.to)
	} else {
		l.compact(t.byNumber)
	}
}

// claims are the claims in target order, for snapshots.
func (t *transferTable) claims() []*enginev1.TransferClaim {
	out := make([]*enginev1.TransferClaim, 0, len(t.claimed))
	for to, upTo := range t.claimed {
		out = append(out, &enginev1.TransferClaim{Target: to, UpTo: upTo})
	}
	slices.SortFunc(out, func(a, b *enginev1.TransferClaim) int { return strings.Compare(a.GetTarget(), b.GetTarget()) })
	return out
}

// sort puts the lists in order after a restore added transfers entity by
// entity.
func (t *transferTable) sort() {
	slices.Sort(t.all.numbers)
	for _, l := range t.byTarget {
		slices.Sort(l.numbers)
	}
}

// each calls f for every transfer in number order until f returns false.
func (t *transferTable) each(f func(x *transfer) bool) { t.eachIn(&t.all, f) }

func (t *transferTable) eachIn(l *numberList, f func(x *transfer) bool) {
	for _, n := range l.numbers {
		if x := t.byNumber[n]; x != nil && !f(x) {
			return
		}
	}
}

// forwardTarget is where a message entering q goes instead: the entity's
// forward_to for its main queue, its forward_dead_lettered_messages_to for
// its dead-letter sub-queue; "" to stay.
func (e *Engine) forwardTarget(q *queue) string {
	if e.version < versionForwarding {
		return ""
	}
	if q.deadLetter {
		return q.entity.settings.forwardDLQ
	}
	return q.entity.settings.forwardTo
}

// store puts m, in state m.state, into q, or into transfer to q's
// forwarding target when it has one and m would be available.
func (e *Engine) store(q *queue, m *message) {
	to := e.forwardTarget(q)
	if to == "" || m.state != stateAvailable {
		q.insert(m)
		return
	}
	if x := q.sessions; x != nil {
		// It goes to no session here, and a session it alone named
		// is not remembered.
		if s := x.owner[m]; s != nil {
			delete(x.owner, m)
			x.update(s)
		}
	}
	m.state = stateTransfer
	q.insert(m)
	x := &transfer{number: e.nextTransfer, to: to, q: q, m: m}
	e.nextTransfer++
	e.transfers.add(x)
	q.entity.counters.Forwarded++
}

// dropTransfers forgets the transfers of deleted entities.
func (e *Engine) dropTransfers(gone []*entity) {
	var drop []*transfer
	e.transfers.each(func(x *transfer) bool {
		if slices.Contains(gone, x.q.entity) {
			drop = append(drop, x)
		}
		return true
	})
	for _, x := range drop {
		e.transfers.remove(x)
	}
}

// completeTransfer removes the transfers the target accepted, ends those
// it refused for good (see FailedTransfer) and those of deleted targets
// that no forwarder sent (see GoneTarget), and records claims.
func (e *Engine) completeTransfer(c *enginev1.CompleteTransfer) int32 {
	var n int32
	for _, num := range c.GetNumbers() {
		if x := e.transfers.byNumber[num]; x != nil {
			x.q.remove(x.m)
			e.transfers.remove(x)
			n++
		}
	}
	for _, f := range c.GetFailed() {
		if x := e.transfers.byNumber[f.GetNumber()]; x != nil {
			e.failTransfer(x, f.GetDescription())
			n++
		}
	}
	if e.version < versionTransferClaims {
		return n
	}
	for _, g := range c.GetGone() {
		var unsent []*transfer
		if l := e.transfers.byTarget[g.GetTarget()]; l != nil {
			e.transfers.eachIn(l, func(x *transfer) bool {
				if x.number > g.GetSentUpTo() {
					unsent = append(unsent, x)
				}
				return true
			})
		}
		for _, x := range unsent {
			e.failTransfer(x, g.GetDescription())
			n++
		}
	}
	for _, cl := range c.GetClaims() {
		if to := cl.GetTarget(); e.transfers.byTarget[to] != nil {
			e.transfers.claimed[to] = max(e.transfers.claimed[to], cl.GetUpTo())
		}
	}
	return n
}

// failTransfer ends x's transfer: its message goes to the dead-letter
// sub-queue of its entity with the reason ReasonTransferFailed, and is not
// forwarded again; a dead letter stays one as it was.
func (e *Engine) failTransfer(x *transfer, description string) {
	e.transfers.remove(x)
	q, m := x.q, x.m
	q.remove(m)
	m.state = stateAvailable
	if q.deadLetter {
		q.insert(m)
		return
	}
	q.entity.counters.DeadLettered++
	m.deadLetter = &deadLetterInfo{reason: ReasonTransferFailed, description: description, source: q.entity.path, enqueuedSeq: m.seq, origin: m.order}
	q.entity.deadLetter.insert(m)
}

// TransferClaim is the highest number of the messages in transfer to the
// entity to that a forwarder may have sent it (see TransferClaim).
func (e *Engine) TransferClaim(to string) uint64 { return e.transfers.claimed[to] }

// TransferClaimAhead is the number up to which a forwarder about to send
// to the entity to claims: that of its n-th oldest message in transfer,
// or of its newest when it has fewer; 0 when it has none.
func (e *Engine) TransferClaimAhead(to string, n int) uint64 {
	l := e.transfers.byTarget[to]
	if l == nil {
		return 0
	}
	var last uint64
	i := 0
	e.transfers.eachIn(l, func(x *transfer) bool {
		last = x.number
		i++
		return i < n
	})
	return last
}

// acceptTransfer enqueues forwarded messages not accepted before (see
// AcceptTransfer).
func (e *Engine) acceptTransfer(now int64, c *enginev1.AcceptTransfer) ([]*raftbusv1.SendResult, *Error) {
	ent, err := e.entity(c.GetEntityPath())
	if err != nil {
		return nil, err
	}
	mark := ent.transfersIn[c.GetStream()].number
	in := c.GetMessages()
	fresh := make([]*raftbusv1.Message, 0, len(in))
	last := mark
	for _, t := range in {
		if t.GetNumber() > mark {
			fresh = append(fresh, t.GetMessage())
			last = t.GetNumber()
		}
	}
	sent, err := e.send(now, c.GetEntityPath(), fresh, nil, false)
	if err != nil {
		return nil, err
	}
	if last > mark {
		ent.raiseMark(c.GetStream(), last, now, e.version)
	}
	out := make([]*raftbusv1.SendResult, len(in))
	j := 0
	for i, t := range in {
		if t.GetNumber() > mark {
			out[i] = sent[j]
			j++
		} else {
			out[i] = &raftbusv1.SendResult{Duplicate: true, PartitionId: e.partitionID}
		}
	}
	return out, nil
}

// checkAcceptTransfer checks an AcceptTransfer's shape.
func checkAcceptTransfer(c *enginev1.AcceptTransfer) *Error {
	if s := c.GetStream(); s == "" || len(s) > maxStreamLength || !utf8.ValidString(s) {
		return invalidf("stream must be 1 to %d bytes of UTF-8", maxStreamLength)
	}
	msgs := make([]*raftbusv1.Message, len(c.GetMessages()))
	var prev uint64
	for i, t := range c.GetMessages() {
		if t.GetNumber() <= prev {
			return invalidf("transferred message %d: numbers must increase (%d after %d)", i, t.GetNumber(), prev)
		}
		prev = t.GetNumber()
		msgs[i] = t.GetMessage()
	}
	return checkMessages(c.GetEntityPath(), msgs, false)
}

// Transfer is a message in transfer, as the forwarder sends it.
type Transfer struct {
	// Number is the message's number in the partition's stream.
	Number uint64
	// From is the entity the message is in transfer from, To the one it
	// goes to.
	From, To string
	// Message is the message as the target gets it: as it was sent, and
	// when it was dead-lettered, with its reason and description as
	// application properties.
	Message *raftbusv1.Message
}

// Transfers returns up to max of the partition's messages in transfer, in
// number order, no more than maxBytes of them as the target gets them
// (encoded; the first whatever its size).
func (e *Engine) Transfers(max int, maxBytes int64) []Transfer {
	return e.transfersIn(&e.transfers.all, max, maxBytes)
}

// TransfersTo is Transfers of the messages in transfer to the entity to.
func (e *Engine) TransfersTo(to string, max int, maxBytes int64) []Transfer {
	l := e.transfers.byTarget[to]
	if l == nil {
		return nil
	}
	return e.transfersIn(l, max, maxBytes)
}

// TransferTargets lists the entities messages are in transfer to, sorted.
func (e *Engine) TransferTargets() []string {
	out := make([]string, 0, len(e.transfers.byTarget))
	for to := range e.transfers.byTarget {
		out = append(out, to)
	}
	sort.Strings(out)
	return out
}

func (e *Engine) transfersIn(l *numberList, max int, maxBytes int64) []Transfer {
	var out []Transfer
	var bytes int64
	e.transfers.eachIn(l, func(x *transfer) bool {
		if len(out) >= max {
			return false
		}
		m := e.forwarded(x.m)
		size := int64(proto.Size(m)) + int64(x.m.ref.Length)
		if len(out) > 0 && bytes+size > maxBytes {
			return false
		}
		bytes += size
		out = append(out, Transfer{Number: x.number, From: x.q.entity.path, To: x.to, Message: m})
		return true
	})
	return out
}

// TransferCount is how many messages are in transfer in the partition.
func (e *Engine) TransferCount() int { return len(e.transfers.byNumber) }

// forwarded is m as its target gets it (its body pending, if on disk).
func (e *Engine) forwarded(m *message) *raftbusv1.Message {
	msg := &raftbusv1.Message{}
	if id, ok := sessionOnlyID(m.meta); ok {
		msg.SessionId = id
	} else if m.meta != nil {
		// meta was encoded by this package (or checked on restore).
		_ = proto.Unmarshal(m.meta, msg)
	}
	msg.MessageId = m.id
	e.handOut(msg, m)
	if dl := m.deadLetter; dl != nil {
		msg.ApplicationProperties = maps.Clone(msg.ApplicationProperties)
		if msg.ApplicationProperties == nil {
			msg.ApplicationProperties = make(map[string]*raftbusv1.PropertyValue, 2)
		}
		msg.ApplicationProperties[DeadLetterReasonProperty] = &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_StringValue{StringValue: dl.reason}}
		msg.ApplicationProperties[DeadLetterErrorDescriptionProperty] = &raftbusv1.PropertyValue{Value: &raftbusv1.PropertyValue_StringValue{StringValue: dl.description}}
	}
	return msg
}
