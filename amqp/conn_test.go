package amqp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// queueHandler is a one-queue broker: what a sender link delivers, a
// receiver link hands out, settled by the peer's disposition.
type queueHandler struct {
	msgs         chan []byte
	mu           sync.Mutex
	dispositions []DeliveryState
	// settled, when set, is sent to at each disposition.
	settled chan struct{}
}

func (h *queueHandler) Connect(*Conn) ConnHandler { return h }
func (h *queueHandler) Closed()                   {}

func (h *queueHandler) Attach(l *Link) error {
	addr := ""
	if l.Incoming && l.Target != nil {
		addr = l.Target.Address
	} else if l.Source != nil {
		addr = l.Source.Address
	}
	if addr != "q" {
		return &Error{Condition: ErrCondNotFound, Description: "no entity " + addr}
	}
	if l.Incoming {
		l.OnMessage = func(d *Delivery) DeliveryState {
			h.msgs <- d.Payload
			return nil
		}
		return nil
	}
	l.OnDisposition = func(d *OutgoingDelivery, state DeliveryState, settled bool) {
		h.mu.Lock()
		h.dispositions = append(h.dispositions, state)
		h.mu.Unlock()
		if h.settled != nil {
			h.settled <- struct{}{}
		}
		if !settled {
			l.Settle(d, state)
		}
	}
	go func() {
		for {
			select {
			case p := <-h.msgs:
				if err := l.Send(l.Context(), &OutgoingDelivery{Tag: []byte{1}, Payload: p}); err != nil {
					return
				}
			case <-l.Context().Done():
				return
			}
		}
	}()
	return nil
}

func startServer(t testing.TB, h Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: h, MaxFrameSize: 4096}
	done := make(chan struct{})
	go func() { srv.Serve(lis); close(done) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return lis.Addr().String()
}

func TestSendAndReceiveThroughGoAMQP(t *testing.T) {
	h := &queueHandler{msgs: make(chan []byte, 10)}
	addr := startServer(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := goamqp.Dial(ctx, "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.NewSender(ctx, "nowhere", nil); err == nil {
		t.Fatal("a sender to an unknown address attached")
	}
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Larger than a frame: the transfer spans several frames both ways.
	big := make([]byte, 20000)
	for i := range big {
		big[i] = byte(i)
	}
	msg := goamqp.NewMessage(big)
	msg.ApplicationProperties = map[string]any{"n": int32(7)}
	if err := snd.Send(ctx, msg, nil); err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.GetData()) != string(big) || got.ApplicationProperties["n"] != int32(7) {
		t.Fatalf("received %d bytes, properties %v", len(got.GetData()), got.ApplicationProperties)
	}
	if err := rcv.AcceptMessage(ctx, got); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dispositions) != 1 {
		t.Fatalf("dispositions %v", h.dispositions)
	}
	if _, ok := h.dispositions[0].(*Accepted); !ok {
		t.Fatalf("disposition %T, want accepted", h.dispositions[0])
	}
}

func TestMalformedFrameClosesOnlyItsConnection(t *testing.T) {
	h := &queueHandler{msgs: make(chan []byte, 10)}
	addr := startServer(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good, err := goamqp.Dial(ctx, "amqp://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()

	bad, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write(headerAMQP[:])
	bad.Write([]byte{0, 0, 0, 3, 2, 0, 0, 0}) // a frame smaller than its header
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := bad.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection with a malformed frame stayed open")
			}
			break
		}
	}
	sess, err := good.NewSession(ctx, nil)
	if err != nil {
		t.Fatalf("the other connection broke: %v", err)
	}
	if _, err := sess.NewSender(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
}

// blockingHandler holds each delivery until its link ends, and records
// what the engine told it.
type blockingHandler struct {
	got      chan struct{}
	detached atomic.Bool
	closed   atomic.Bool
	creds    chan SASLCredentials
}

func (h *blockingHandler) Connect(c *Conn) ConnHandler {
	h.creds <- c.Credentials()
	return h
}
func (h *blockingHandler) Closed() { h.closed.Store(true) }
func (h *blockingHandler) Attach(l *Link) error {
	l.OnMessage = func(d *Delivery) DeliveryState {
		h.got <- struct{}{}
		<-l.Context().Done()
		return &Released{}
	}
	l.OnDetach = func(*Error) { h.detached.Store(true) }
	return nil
}

func TestCloseEndsLinksBeforeReturning(t *testing.T) {
	h := &blockingHandler{got: make(chan struct{}, 1), creds: make(chan SASLCredentials, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := goamqp.Dial(ctx, "amqp://"+lis.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("user", "secret")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if c := <-h.creds; c.Mechanism != "PLAIN" || c.Username != "user" || c.Password != "secret" {
		t.Fatalf("credentials %+v", c)
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() { sent <- snd.Send(ctx, goamqp.NewMessage([]byte("x")), nil) }()
	<-h.got

	srv.Close()
	// Close returned: the delivery in progress has ended, the link and
	// the connection have been reported gone.
	if !h.detached.Load() || !h.closed.Load() {
		t.Fatalf("after Close: link detached %v, connection closed %v", h.detached.Load(), h.closed.Load())
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	if err := <-sent; err == nil {
		t.Fatal("a send cut short by the server's close succeeded")
	}
}

func TestSASLRefusal(t *testing.T) {
	h := &queueHandler{msgs: make(chan []byte, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: h, Authenticate: func(c SASLCredentials) bool { return c.Password == "right" }}
	go srv.Serve(lis)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := goamqp.Dial(ctx, "amqp://"+lis.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("u", "wrong")}); err == nil {
		c.Close()
		t.Fatal("wrong credentials were accepted")
	}
	c, err := goamqp.Dial(ctx, "amqp://"+lis.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("u", "right")})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// panicky panics in its handler: the connection ends, the server goes on.
type panicky struct{ queueHandler }

func (p *panicky) Connect(*Conn) ConnHandler { return p }
func (p *panicky) Attach(l *Link) error {
	if l.Name == "boom" {
		panic("handler bug")
	}
	return p.queueHandler.Attach(l)
}

func TestAPanicEndsOnlyItsConnection(t *testing.T) {
	addr := startServer(t, &panicky{queueHandler{msgs: make(chan []byte, 1)}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bad, err := goamqp.Dial(ctx, "amqp://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	sess, err := bad.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.NewSender(ctx, "q", &goamqp.SenderOptions{Name: "boom"}); err == nil {
		t.Fatal("the link whose attach panicked attached")
	}
	good, err := goamqp.Dial(ctx, "amqp://"+addr, nil)
	if err != nil {
		t.Fatalf("the server stopped after a panic: %v", err)
	}
	defer good.Close()
	s2, err := good.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.NewSender(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
}
