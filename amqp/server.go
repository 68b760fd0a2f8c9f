package amqp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
)

// Server accepts AMQP 1.0 connections on listeners and hands their links
// to Handler. TLS, when wanted, is the listener's (tls.NewListener).
type Server struct {
	// Handler decides what every connection's links do.
	Handler Handler
	// Authenticate, when set, accepts or refuses the SASL credentials of
	// a connection; unset, ANONYMOUS and any PLAIN credentials pass
	// (authorization then comes from tokens, as with $cbs).
	Authenticate func(SASLCredentials) bool
	// ContainerID names this end in open; default "raftbus".
	ContainerID string
	// MaxFrameSize is the largest frame accepted; default 64 KiB.
	MaxFrameSize uint32
	// MaxMessageSize bounds one incoming delivery; default 16 MiB.
	MaxMessageSize uint64
	Log            *slog.Logger

	mu     sync.Mutex
	lis    map[net.Listener]struct{}
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Handler serves the connections of a Server.
type Handler interface {
	// Connect is called when a connection has opened; it returns what
	// serves that connection's links.
	Connect(c *Conn) ConnHandler
}

// ConnHandler serves the links of one connection.
type ConnHandler interface {
	// Attach is called for each link the peer attaches, on a goroutine
	// of its own (it may block, e.g. to wait for a session). It sets the
	// link's callbacks, and may set the reply's source and properties.
	// An error refuses the link; an *Error is sent to the peer as is.
	Attach(l *Link) error
	// Closed is called once when the connection has ended, after every
	// link's OnDetach.
	Closed()
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("amqp: server closed")

func (s *Server) defaults() {
	if s.ContainerID == "" {
		s.ContainerID = "raftbus"
	}
	if s.MaxFrameSize == 0 {
		s.MaxFrameSize = 64 << 10
	}
	if s.MaxMessageSize == 0 {
		s.MaxMessageSize = 16 << 20
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
}

// Serve accepts connections on l until Close; each connection runs on
// goroutines of its own that Close ends.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.defaults()
	if s.lis == nil {
		s.lis = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
	}
	s.lis[l] = struct{}{}
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops the listeners and ends every connection, waiting until
// their goroutines are gone.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for l := range s.lis {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown(&Error{Condition: "amqp:connection:forced", Description: "the server is shutting down"})
	}
	s.wg.Wait()
	return nil
}

// Conn is an open connection, as handlers see it.
type Conn struct {
	c *conn
}

// Credentials are what the client authenticated with in SASL.
func (c *Conn) Credentials() SASLCredentials { return c.c.credentials }

// RemoteAddr is the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.c.nc.RemoteAddr() }

// Context ends when the connection does.
func (c *Conn) Context() context.Context { return c.c.ctx }

// Close ends the connection with err (nil: a clean close).
func (c *Conn) Close(err *Error) { c.c.shutdown(err) }
