package amqp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"
)

// conn is the server side of one connection: a reader goroutine that
// runs the state machines, and writes from any goroutine, each frame
// whole, gathered into fewer system calls when they come together.
type conn struct {
	srv         *Server
	nc          net.Conn
	fr          *frameReader
	credentials SASLCredentials
	handler     ConnHandler
	ctx         context.Context
	cancel      context.CancelFunc

	w *groupWriter

	// wg counts the goroutines the connection starts (attaches,
	// deliveries, dispositions, heartbeats): finish waits for them
	// before telling the handler the connection is gone.
	wg sync.WaitGroup

	mu           sync.Mutex
	sessions     map[uint16]*session // by channel (the peer's and ours)
	peerMaxFrame uint32
	closing      bool
	done         chan struct{}
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	fr := newFrameReader(nc)
	// Frames before open may be at most 512 bytes by the spec; some
	// clients send a larger open, and nothing is gained by refusing it.
	fr.Max = s.MaxFrameSize
	return &conn{srv: s, nc: nc, fr: fr, ctx: ctx, cancel: cancel, w: newGroupWriter(nc),
		sessions: map[uint16]*session{}, peerMaxFrame: minMaxFrameSize, done: make(chan struct{})}
}

// spawn runs f on a goroutine that finish waits for.
func (c *conn) spawn(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.recoverPanic()
		f()
	}()
}

// recoverPanic ends the connection on a panic instead of the process: a
// node serves Raft groups and other clients, which one peer's input must
// not take down (as net/http does for a handler). The stack is logged:
// it is a bug to fix.
func (c *conn) recoverPanic() {
	if r := recover(); r != nil {
		c.srv.Log.Error("amqp connection panicked: closing it", "remote", c.nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
		c.shutdown(&Error{Condition: ErrCondInternal, Description: "internal error"})
	}
}

func (c *conn) writeRaw(b []byte) error { return c.w.write(b) }

func (c *conn) writeFrame(typ uint8, channel uint16, p performative, payload []byte) error {
	b, err := encodeFrame(typ, channel, p, payload)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	return c.writeRaw(b)
}

func (c *conn) send(channel uint16, p performative) error {
	return c.writeFrame(frameTypeAMQP, channel, p, nil)
}

// serve runs the connection to its end.
func (c *conn) serve() {
	defer c.finish()
	defer c.recoverPanic()
	// A peer that never speaks must not hold a connection forever.
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	err := c.handshake()
	if err != nil {
		c.srv.Log.Debug("amqp handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	c.nc.SetReadDeadline(time.Time{})
	c.handler = c.srv.Handler.Connect(&Conn{c: c})
	for {
		f, err := c.fr.read()
		if err != nil {
			c.readFailed(err)
			return
		}
		if len(f.Body) == 0 {
			continue // heartbeat
		}
		if f.Type != frameTypeAMQP {
			c.shutdown(&Error{Condition: ErrCondFramingError, Description: fmt.Sprintf("frame type %d after open", f.Type)})
			return
		}
		p, err := decodePerformative(f.Body)
		if err != nil {
			c.shutdown(&Error{Condition: ErrCondDecode, Description: err.Error()})
			return
		}
		if stop := c.dispatch(f.Channel, p); stop {
			return
		}
	}
}

func (c *conn) readFailed(err error) {
	switch {
	case errors.Is(err, ErrMalformed):
		c.shutdown(&Error{Condition: ErrCondFramingError, Description: err.Error()})
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		c.srv.Log.Debug("amqp connection read failed", "remote", c.nc.RemoteAddr(), "err", err)
	}
}

// handshake runs protocol headers, SASL and open.
func (c *conn) handshake() error {
	h, err := c.fr.readProtocolHeader()
	if err != nil {
		return err
	}
	if h == headerSASL {
		if err := c.sasl(); err != nil {
			return err
		}
		if h, err = c.fr.readProtocolHeader(); err != nil {
			return err
		}
	}
	if h != headerAMQP {
		// Answer with the header we speak, as the spec asks, then hang up.
		c.writeRaw(headerAMQP[:])
		return fmt.Errorf("unsupported protocol header %q", h[:])
	}
	if err := c.writeRaw(headerAMQP[:]); err != nil {
		return err
	}
	f, err := c.fr.read()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	p, err := decodePerformative(f.Body)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	o, ok := p.(*open)
	if !ok || f.Type != frameTypeAMQP {
		return fmt.Errorf("first frame is %T, not open", p)
	}
	c.mu.Lock()
	c.peerMaxFrame = max(o.MaxFrameSize, minMaxFrameSize)
	c.mu.Unlock()
	if err := c.send(0, &open{ContainerID: c.srv.ContainerID, MaxFrameSize: c.srv.MaxFrameSize, ChannelMax: channelMax}); err != nil {
		return err
	}
	if o.IdleTimeout > 0 {
		every := time.Duration(o.IdleTimeout) * time.Millisecond / 2
		c.spawn(func() { c.heartbeat(every) })
	}
	return nil
}

// heartbeat sends empty frames so that a peer that asked for an idle
// timeout does not hang up on a quiet connection.
func (c *conn) heartbeat(every time.Duration) {
	t := time.NewTicker(max(every, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			if c.writeRaw([]byte{0, 0, 0, 8, 2, 0, 0, 0}) != nil {
				return
			}
		}
	}
}

// dispatch applies one performative; true ends the connection.
func (c *conn) dispatch(channel uint16, p any) bool {
	if _, ok := p.(*open); ok {
		c.shutdown(&Error{Condition: "amqp:illegal-state", Description: "open received twice"})
		return true
	}
	if cl, ok := p.(*closePerf); ok {
		if cl.Error != nil {
			c.srv.Log.Debug("amqp peer closed with an error", "remote", c.nc.RemoteAddr(), "err", cl.Error)
		}
		c.shutdown(nil)
		return true
	}
	if b, ok := p.(*begin); ok {
		return c.begin(channel, b)
	}
	c.mu.Lock()
	s := c.sessions[channel]
	c.mu.Unlock()
	if s == nil {
		c.shutdown(&Error{Condition: "amqp:connection:framing-error", Description: fmt.Sprintf("channel %d has no session", channel)})
		return true
	}
	if e, ok := p.(*end); ok {
		s.ended(e.Error)
		c.mu.Lock()
		delete(c.sessions, channel)
		c.mu.Unlock()
		c.send(channel, &end{})
		return false
	}
	if err := s.dispatch(p); err != nil {
		var ae *Error
		if !errors.As(err, &ae) {
			ae = &Error{Condition: ErrCondInternal, Description: err.Error()}
		}
		s.ended(ae)
		c.mu.Lock()
		delete(c.sessions, channel)
		c.mu.Unlock()
		c.send(channel, &end{Error: ae})
	}
	return false
}

func (c *conn) begin(channel uint16, b *begin) bool {
	c.mu.Lock()
	_, inUse := c.sessions[channel]
	if !inUse && channel <= channelMax {
		c.sessions[channel] = newSession(c, channel, b)
	}
	c.mu.Unlock()
	if inUse || channel > channelMax {
		c.shutdown(&Error{Condition: ErrCondFramingError, Description: fmt.Sprintf("begin on channel %d, which is in use or beyond channel-max", channel)})
		return true
	}
	// Our channel number is the peer's: the two are independent, and
	// reusing it keeps the mapping trivial.
	ch := channel
	c.send(channel, &begin{RemoteChannel: &ch, NextOutgoingID: 0, IncomingWindow: sessionWindow,
		OutgoingWindow: sessionWindow, HandleMax: maxHandle})
	return false
}

// shutdown sends close (with err) unless already closing and closes the
// socket; the reader then ends and finish cleans up.
func (c *conn) shutdown(err *Error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.mu.Unlock()
	if err != nil {
		c.srv.Log.Debug("amqp closing connection", "remote", c.nc.RemoteAddr(), "err", err)
	}
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.send(0, &closePerf{Error: err})
	c.nc.Close()
	c.cancel()
}

// finish ends every session and tells the handler.
func (c *conn) finish() {
	c.cancel()
	c.nc.Close()
	c.mu.Lock()
	c.closing = true
	sessions := c.sessions
	c.sessions = map[uint16]*session{}
	c.mu.Unlock()
	for _, s := range sessions {
		s.ended(nil)
	}
	// Every link's context has ended: what runs for them returns.
	c.wg.Wait()
	if c.handler != nil {
		c.handler.Closed()
	}
	close(c.done)
}
