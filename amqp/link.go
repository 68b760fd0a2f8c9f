package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// incomingCredit is the credit granted to a peer that sends to us, topped
// up as deliveries finish, so that at most this many are processed at
// once per link.
const incomingCredit = 256

// ErrLinkDetached is returned by Send on a link that has ended.
var ErrLinkDetached = errors.New("amqp: link detached")

// Link is one attached link. The handler's Attach sets its callbacks;
// all of them run on goroutines of the engine, never while it holds a
// lock, and must not block for long but for OnMessage.
type Link struct {
	// Name, Source, Target and Properties are the peer's attach.
	Name       string
	Source     *Source
	Target     *Target
	Properties map[Symbol]any
	// Incoming: the peer sends messages on this link (it is the sender).
	Incoming bool
	// SenderSettleMode and ReceiverSettleMode are the modes the peer
	// asked for.
	SenderSettleMode   uint8
	ReceiverSettleMode uint8

	// ReplySource and ReplyProperties, set by Attach, go into the reply
	// (default: the peer's source, no properties).
	ReplySource     *Source
	ReplyProperties map[Symbol]any
	// MaxMessageSize, set by Attach on an incoming link, is the largest
	// delivery it takes, announced in the reply; a larger one detaches
	// the link. Zero: the Server's MaxMessageSize.
	MaxMessageSize uint64

	// OnMessage handles a complete incoming delivery and returns its
	// outcome (nil: Accepted). Deliveries of one link run concurrently,
	// up to the link's credit.
	OnMessage func(d *Delivery) DeliveryState
	// OnDisposition handles the peer's disposition of a delivery sent
	// with Send. settled: the peer has forgotten it (receiver settle
	// mode first); otherwise answer with Settle.
	OnDisposition func(d *OutgoingDelivery, state DeliveryState, settled bool)
	// OnDetach is called once when the link ends, whoever ended it; err
	// is the peer's error, if any.
	OnDetach func(err *Error)

	s          *session
	handle     uint32
	ctx        context.Context
	cancel     context.CancelFunc
	attachDone chan struct{} // closed once the attach is answered (or failed)
	attachOnce sync.Once
	sendMu     sync.Mutex // one outgoing delivery's frames at a time

	mu            sync.Mutex
	deliveryCount uint32
	credit        uint32
	drain         bool
	changed       *signal
	inflight      int
	partial       *Delivery
	ended         bool
	detachedByUs  bool
}

// Delivery is a message the peer sent.
type Delivery struct {
	ID      uint32
	Tag     []byte
	Format  uint32
	Settled bool
	Payload []byte

	afterSettle func()
}

// AfterSettle has f run once the delivery's disposition is sent (at
// once after OnMessage returns, when the peer sent it settled): for an
// answer that the peer takes only after its request is settled.
// Called from OnMessage.
func (d *Delivery) AfterSettle(f func()) { d.afterSettle = f }

// OutgoingDelivery is a message sent to the peer.
type OutgoingDelivery struct {
	Tag     []byte
	Format  uint32
	Payload []byte
	// Settled sends it pre-settled: the peer sends no disposition.
	Settled bool
	// Value is the caller's, e.g. what settles it.
	Value any

	ID   uint32
	link *Link
}

func newLink(s *session, a *attach) *Link {
	ctx, cancel := context.WithCancel(s.c.ctx)
	return &Link{Name: a.Name, Source: a.Source, Target: a.Target, Properties: a.Properties, Incoming: a.Role == roleSender,
		SenderSettleMode: a.SndSettleMode, ReceiverSettleMode: a.RcvSettleMode,
		s: s, handle: a.Handle, ctx: ctx, cancel: cancel, attachDone: make(chan struct{}), changed: newSignal()}
}

// Context ends when the link does.
func (l *Link) Context() context.Context { return l.ctx }

// Conn is the link's connection.
func (l *Link) Conn() *Conn { return &Conn{c: l.s.c} }

// attached asks the handler and answers the attach.
func (l *Link) attached() {
	// Even when Attach panics: the link's end waits for this.
	defer l.markAttached()
	var err error
	if l.Target != nil && l.Target.Coordinator {
		// Transactions (.NET's and Java's transaction scopes) are not
		// served: refuse the coordinator link, so that the SDK says so
		// rather than fails on a malformed target.
		err = &Error{Condition: ErrCondNotImplemented, Description: "transactions are not supported by this broker: send and settle without a transaction scope"}
	} else {
		err = l.s.c.handler.Attach(l)
	}
	reply := &attach{Name: l.Name, Handle: l.handle, Role: !boolRole(l.Incoming), SndSettleMode: l.SenderSettleMode,
		RcvSettleMode: l.ReceiverSettleMode, Source: l.Source, Target: l.Target, Properties: l.ReplyProperties}
	if l.ReplySource != nil {
		reply.Source = l.ReplySource
	}
	if l.Incoming {
		// We settle on receipt: receiver settle mode first.
		reply.RcvSettleMode = ReceiverSettleFirst
		// Under the lock: the reader goroutine checks deliveries
		// against it (nothing orders the two but the network).
		l.mu.Lock()
		if l.MaxMessageSize == 0 || l.MaxMessageSize > l.s.c.srv.MaxMessageSize {
			l.MaxMessageSize = l.s.c.srv.MaxMessageSize
		}
		reply.MaxMessageSize = l.MaxMessageSize
		l.mu.Unlock()
	}
	if err != nil {
		// A refused attach: the reply carries no terminus on our side,
		// and a detach with the reason follows (part 2, section 2.6.3).
		if l.Incoming {
			reply.Target = nil
		} else {
			reply.Source = nil
		}
		l.s.send(reply)
		l.markAttached()
		l.Detach(asError(err))
		return
	}
	l.s.send(reply)
	l.markAttached()
	if l.Incoming {
		l.mu.Lock()
		l.credit = incomingCredit
		l.mu.Unlock()
		l.s.sendSessionFlow(l)
	}
}

func (l *Link) markAttached() { l.attachOnce.Do(func() { close(l.attachDone) }) }

func boolRole(incoming bool) bool {
	if incoming {
		return roleSender
	}
	return roleReceiver
}

func asError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return &Error{Condition: ErrCondInternal, Description: err.Error()}
}

// flow applies the link part of the peer's flow.
func (l *Link) flow(f *flow) {
	l.mu.Lock()
	if !l.Incoming && f.LinkCredit != nil {
		// The credit is relative to the peer's view of the delivery
		// count; deliveries in flight already used some of it.
		dc := l.deliveryCount
		if f.DeliveryCount != nil {
			dc = *f.DeliveryCount
		}
		l.credit = dc + *f.LinkCredit - l.deliveryCount
		l.drain = f.Drain
	}
	// A drain that leaves no credit (go-amqp drains with link-credit 0)
	// is done as soon as it is asked: answer it here rather than wait
	// for a send that can never happen.
	drainedAlready := l.drain && l.credit == 0
	l.mu.Unlock()
	l.changed.broadcast()
	if drainedAlready {
		l.DrainComplete()
		return
	}
	if f.Echo {
		l.s.sendSessionFlow(l)
	}
}

func (l *Link) fillFlow(f *flow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, dc, cr := l.handle, l.deliveryCount, l.credit
	f.Handle, f.DeliveryCount, f.LinkCredit = &h, &dc, &cr
	f.Drain = l.drain
}

// Credit is the link credit the peer has given us, and whether it asked
// for a drain (use the credit now or give it back with DrainComplete).
func (l *Link) Credit() (credit uint32, drain bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.credit, l.drain
}

// CreditChanged returns a channel closed at the peer's next flow.
func (l *Link) CreditChanged() <-chan struct{} { return l.changed.wait() }

// DrainComplete gives the rest of a drained credit back: nothing more to
// send for now.
func (l *Link) DrainComplete() error {
	l.mu.Lock()
	if !l.drain {
		l.mu.Unlock()
		return nil
	}
	l.deliveryCount += l.credit
	l.credit = 0
	l.mu.Unlock()
	err := l.s.sendSessionFlow(l)
	l.mu.Lock()
	l.drain = false
	l.mu.Unlock()
	return err
}

// Send sends d once the link has credit, splitting it into frames the
// peer accepts. Unless d.Settled, the peer's disposition comes to
// OnDisposition.
func (l *Link) Send(ctx context.Context, d *OutgoingDelivery) error {
	if l.Incoming {
		return fmt.Errorf("amqp: Send on link %q, on which the peer sends", l.Name)
	}
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	for {
		l.mu.Lock()
		if l.ended {
			l.mu.Unlock()
			return ErrLinkDetached
		}
		if l.credit > 0 {
			l.credit--
			l.deliveryCount++
			l.mu.Unlock()
			break
		}
		ch := l.changed.wait()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.ctx.Done():
			return ErrLinkDetached
		}
	}
	s := l.s
	s.mu.Lock()
	d.ID, d.link = s.nextDeliveryID, l
	s.nextDeliveryID++
	if !d.Settled {
		s.outgoing[d.ID] = d
	}
	maxFrame := s.c.peerMaxFrame
	s.mu.Unlock()

	id, format := d.ID, d.Format
	t := &transfer{Handle: l.handle, DeliveryID: &id, DeliveryTag: d.Tag, MessageFormat: &format, Settled: d.Settled, More: true}
	var e encoder
	if err := e.value(t.described()); err != nil {
		return err
	}
	room := int(maxFrame) - frameHeaderSize - len(e.buf)
	if room < 1 {
		return fmt.Errorf("amqp: the peer's frames of %d bytes cannot carry a transfer", maxFrame)
	}
	payload := d.Payload
	for {
		chunk := payload
		if len(chunk) > room {
			chunk = chunk[:room]
		}
		payload = payload[len(chunk):]
		t.More = len(payload) > 0
		if err := l.waitWindow(ctx); err != nil {
			return err
		}
		if err := s.write(t, chunk); err != nil {
			return err
		}
		if !t.More {
			return nil
		}
	}
}

// waitWindow takes one transfer from the session's outgoing window,
// waiting for the peer to open it.
func (l *Link) waitWindow(ctx context.Context) error {
	s := l.s
	for {
		s.mu.Lock()
		if s.finished {
			s.mu.Unlock()
			return ErrLinkDetached
		}
		if s.remoteIncomingWindow > 0 {
			s.remoteIncomingWindow--
			s.nextOutgoingID++
			s.mu.Unlock()
			return nil
		}
		ch := s.windowChanged.wait()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.ctx.Done():
			return ErrLinkDetached
		}
	}
}

// Settle settles a delivery sent with Send with its final state (nil:
// Accepted), answering the peer's unsettled disposition.
func (l *Link) Settle(d *OutgoingDelivery, state DeliveryState) error {
	if state == nil {
		state = &Accepted{}
	}
	l.s.mu.Lock()
	delete(l.s.outgoing, d.ID)
	l.s.mu.Unlock()
	return l.s.send(&disposition{Role: roleSender, First: d.ID, Settled: true, State: state.outcome()})
}

func (l *Link) disposition(d *OutgoingDelivery, state DeliveryState, settled bool) {
	if l.OnDisposition == nil {
		if !settled {
			l.Settle(d, state)
		}
		return
	}
	l.s.c.spawn(func() { l.OnDisposition(d, state, settled) })
}

// transfer takes one transfer frame of an incoming delivery.
func (l *Link) transfer(t *transfer) error {
	if !l.Incoming {
		return &Error{Condition: "amqp:illegal-state", Description: fmt.Sprintf("transfer on link %q, on which the peer receives", l.Name)}
	}
	l.mu.Lock()
	if l.partial == nil {
		if t.DeliveryID == nil {
			l.mu.Unlock()
			return &Error{Condition: ErrCondInvalidField, Description: "the first transfer of a delivery has no delivery-id"}
		}
		l.partial = &Delivery{ID: *t.DeliveryID, Tag: t.DeliveryTag}
		if t.MessageFormat != nil {
			l.partial.Format = *t.MessageFormat
		}
		l.deliveryCount++
		if l.credit > 0 {
			l.credit--
		}
		l.inflight++
	}
	d := l.partial
	if t.Aborted {
		l.partial = nil
		l.inflight--
		l.mu.Unlock()
		return nil
	}
	d.Settled = d.Settled || t.Settled
	d.Payload = append(d.Payload, t.Payload...)
	if uint64(len(d.Payload)) > l.MaxMessageSize {
		l.partial = nil
		l.inflight--
		limit := l.MaxMessageSize
		l.mu.Unlock()
		l.s.c.spawn(func() {
			l.Detach(&Error{Condition: ErrCondMessageTooLarge, Description: fmt.Sprintf("a message larger than the link's limit of %d bytes", limit)})
		})
		return nil
	}
	if t.More {
		l.mu.Unlock()
		return nil
	}
	l.partial = nil
	l.mu.Unlock()
	l.s.c.spawn(func() { l.deliver(d) })
	return nil
}

func (l *Link) deliver(d *Delivery) {
	<-l.attachDone
	var state DeliveryState
	if l.OnMessage != nil {
		state = l.OnMessage(d)
	} else {
		state = &Rejected{Error: &Error{Condition: ErrCondNotAllowed, Description: "this link takes no messages"}}
	}
	if state == nil {
		state = &Accepted{}
	}
	if !d.Settled {
		l.s.send(&disposition{Role: roleReceiver, First: d.ID, Settled: true, State: state.outcome()})
	}
	if d.afterSettle != nil {
		d.afterSettle()
	}
	l.mu.Lock()
	l.inflight--
	topUp := !l.ended && l.credit < incomingCredit/2
	if topUp {
		l.credit = incomingCredit - uint32(l.inflight)
	}
	l.mu.Unlock()
	if topUp {
		l.s.sendSessionFlow(l)
	}
}

// Detach ends the link from our side, with err (nil: a clean detach).
// Must not be called from Attach (return the error instead).
func (l *Link) Detach(err *Error) {
	l.mu.Lock()
	if l.ended || l.detachedByUs {
		l.mu.Unlock()
		return
	}
	l.detachedByUs = true
	l.mu.Unlock()
	l.s.send(&detach{Handle: l.handle, Closed: true, Error: err})
	l.end(err)
}

// end marks the link ended and tells the handler; true when the peer
// ended it first (it then needs our detach).
func (l *Link) end(err *Error) bool {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return false
	}
	l.ended = true
	byUs := l.detachedByUs
	l.mu.Unlock()
	l.cancel()
	l.changed.broadcast()
	<-l.attachDone
	if l.OnDetach != nil {
		l.OnDetach(err)
	}
	return !byUs
}
