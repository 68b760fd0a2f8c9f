package amqp

import (
	"fmt"
	"sync"
)

const (
	channelMax = 255
	maxHandle  = 1023
	// sessionWindow is the session's incoming window in transfer frames,
	// topped up when half is used.
	sessionWindow = 5000
)

// session is one session of a connection: its windows, its links by
// handle and its outgoing deliveries waiting for the peer's disposition.
type session struct {
	c       *conn
	channel uint16

	mu sync.Mutex
	// incoming (peer to us)
	nextIncomingID uint32
	incomingWindow uint32
	// outgoing (us to peer)
	nextOutgoingID       uint32
	remoteIncomingWindow uint32
	nextDeliveryID       uint32
	windowChanged        *signal
	links                map[uint32]*Link             // by handle (the peer's and ours)
	outgoing             map[uint32]*OutgoingDelivery // unsettled deliveries we sent, by delivery id
	// finished is set once the session has ended: nothing more goes out
	// on its channel.
	finished bool
}

func newSession(c *conn, channel uint16, b *begin) *session {
	return &session{c: c, channel: channel, nextIncomingID: b.NextOutgoingID, incomingWindow: sessionWindow,
		remoteIncomingWindow: b.IncomingWindow, windowChanged: newSignal(),
		links: map[uint32]*Link{}, outgoing: map[uint32]*OutgoingDelivery{}}
}

func (s *session) send(p performative) error { return s.write(p, nil) }

// write sends a frame of the session unless it has ended: after end,
// nothing may go out on its channel. The lock is held while writing, so
// that the end cannot overtake a frame already on its way.
func (s *session) write(p performative, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return ErrLinkDetached
	}
	return s.c.writeFrame(frameTypeAMQP, s.channel, p, payload)
}

// dispatch applies a performative on this session; an error ends it.
func (s *session) dispatch(p any) error {
	switch p := p.(type) {
	case *attach:
		return s.attach(p)
	case *flow:
		return s.flow(p)
	case *transfer:
		return s.transfer(p)
	case *disposition:
		return s.disposition(p)
	case *detach:
		return s.detach(p)
	}
	return &Error{Condition: "amqp:illegal-state", Description: fmt.Sprintf("unexpected %T", p)}
}

func (s *session) attach(a *attach) error {
	if a.Handle > maxHandle {
		return &Error{Condition: "amqp:session:handle-max-exceeded", Description: fmt.Sprintf("handle %d", a.Handle)}
	}
	s.mu.Lock()
	if _, inUse := s.links[a.Handle]; inUse {
		s.mu.Unlock()
		return &Error{Condition: ErrCondHandleInUse, Description: fmt.Sprintf("handle %d is in use", a.Handle)}
	}
	l := newLink(s, a)
	s.links[a.Handle] = l
	s.mu.Unlock()
	s.c.spawn(l.attached)
	return nil
}

func (s *session) link(handle uint32) (*Link, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links[handle]
	if l == nil {
		return nil, &Error{Condition: ErrCondUnattached, Description: fmt.Sprintf("handle %d is not attached", handle)}
	}
	return l, nil
}

func (s *session) flow(f *flow) error {
	s.mu.Lock()
	// The peer's view of our next transfer id sets how many more it
	// takes (part 2, section 2.5.6).
	nextIn := uint32(0)
	if f.NextIncomingID != nil {
		nextIn = *f.NextIncomingID
	}
	s.remoteIncomingWindow = nextIn + f.IncomingWindow - s.nextOutgoingID
	s.windowChanged.broadcast()
	s.mu.Unlock()
	if f.Handle == nil {
		if f.Echo {
			s.sendSessionFlow(nil)
		}
		return nil
	}
	l, err := s.link(*f.Handle)
	if err != nil {
		return err
	}
	l.flow(f)
	return nil
}

// sendSessionFlow sends our windows, with the link's state when l is set.
func (s *session) sendSessionFlow(l *Link) error {
	s.mu.Lock()
	f := &flow{IncomingWindow: s.incomingWindow, NextOutgoingID: s.nextOutgoingID, OutgoingWindow: sessionWindow}
	nextIn := s.nextIncomingID
	f.NextIncomingID = &nextIn
	s.mu.Unlock()
	if l != nil {
		l.fillFlow(f)
	}
	return s.send(f)
}

func (s *session) transfer(t *transfer) error {
	s.mu.Lock()
	s.nextIncomingID++
	if s.incomingWindow == 0 {
		s.mu.Unlock()
		return &Error{Condition: "amqp:session:window-violation", Description: "transfer beyond the incoming window"}
	}
	s.incomingWindow--
	topUp := s.incomingWindow < sessionWindow/2
	if topUp {
		s.incomingWindow = sessionWindow
	}
	s.mu.Unlock()
	if topUp {
		if err := s.sendSessionFlow(nil); err != nil {
			return err
		}
	}
	l, err := s.link(t.Handle)
	if err != nil {
		return err
	}
	return l.transfer(t)
}

// disposition applies the peer's dispositions of our deliveries (the
// peer is their receiver). Dispositions of the peer's own deliveries to
// us need nothing: we settle those on receipt.
func (s *session) disposition(d *disposition) error {
	if d.Role != roleReceiver {
		return nil
	}
	last := d.First
	if d.Last != nil {
		last = *d.Last
	}
	state, err := decodeState(d.State)
	if err != nil {
		// Ignoring it would leave the peer waiting for our settlement.
		return &Error{Condition: ErrCondDecode, Description: fmt.Sprintf("disposition: %v", err)}
	}
	var ds []*OutgoingDelivery
	s.mu.Lock()
	// Bounded: a range covers at most the deliveries still unsettled.
	if last-d.First < uint32(len(s.outgoing)) {
		for id := d.First; ; id++ {
			if od := s.outgoing[id]; od != nil {
				ds = append(ds, od)
				if d.Settled {
					delete(s.outgoing, id)
				}
			}
			if id == last {
				break
			}
		}
	} else {
		for id, od := range s.outgoing {
			if id-d.First <= last-d.First {
				ds = append(ds, od)
				if d.Settled {
					delete(s.outgoing, id)
				}
			}
		}
	}
	s.mu.Unlock()
	for _, od := range ds {
		od.link.disposition(od, state, d.Settled)
	}
	return nil
}

func (s *session) detach(d *detach) error {
	l, err := s.link(d.Handle)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.links, d.Handle)
	s.mu.Unlock()
	if l.end(d.Error) {
		// The peer detached first: answer in kind (a link closed, or
		// only detached, stays so on both ends).
		return s.send(&detach{Handle: d.Handle, Closed: d.Closed})
	}
	return nil
}

// ended ends every link of the session (end received or connection gone).
func (s *session) ended(err *Error) {
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return
	}
	s.finished = true
	links := s.links
	s.links = map[uint32]*Link{}
	s.outgoing = map[uint32]*OutgoingDelivery{}
	s.windowChanged.broadcast()
	s.mu.Unlock()
	for _, l := range links {
		l.end(err)
	}
}

// signal wakes every waiter at each broadcast.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

// wait returns a channel closed at the next broadcast.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}
