package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/internal/certs"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// killable is a listener whose node can be killed as by SIGKILL: every
// connection is reset at once and the port refuses from then on.
type killable struct {
	net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func (k *killable) Accept() (net.Conn, error) {
	c, err := k.Listener.Accept()
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		c.Close()
		return nil, net.ErrClosed
	}
	k.conns = append(k.conns, c)
	return c, nil
}

func (k *killable) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		return
	}
	k.killed = true
	k.Listener.Close()
	for _, c := range k.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// dyingLeader leads every partition and applies what it is sent; kill
// decides, per request, whether it dies after applying and before it
// answers.
type dyingLeader struct {
	raftbusv1.UnimplementedAdminServiceServer
	raftbusv1.UnimplementedMessagingServiceServer
	addr    string
	lis     *killable
	mu      sync.Mutex
	applied map[string]int
	// dies says whether the node dies after applying ids.
	dies func(ids []string) bool
	// answer, when set, is what the node answers after applying ids
	// instead of their results.
	answer func(ids []string) error
	// short: the node answers one result fewer than it was sent.
	short bool
}

func (d *dyingLeader) GetRoutingTable(ctx context.Context, req *raftbusv1.GetRoutingTableRequest) (*raftbusv1.GetRoutingTableResponse, error) {
	return &raftbusv1.GetRoutingTableResponse{Entities: []*raftbusv1.EntityRoute{{
		EntityPath: req.GetEntityPath(), PartitionCount: 1, RequiresDuplicateDetection: true,
		Partitions: []*raftbusv1.PartitionRoute{{PartitionId: 0, LeaderAddress: d.addr}},
	}}}, nil
}

func (d *dyingLeader) apply(ctx context.Context, ids ...string) error {
	d.mu.Lock()
	for _, id := range ids {
		d.applied[id]++
	}
	d.mu.Unlock()
	if d.dies != nil && d.dies(ids) {
		d.lis.kill()
		<-ctx.Done()
		return ctx.Err()
	}
	if d.answer != nil {
		return d.answer(ids)
	}
	return nil
}

func (d *dyingLeader) appliedTimes(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied[id]
}

func (d *dyingLeader) SendEach(ctx context.Context, req *raftbusv1.SendEachRequest) (*raftbusv1.SendEachResponse, error) {
	var ids []string
	resp := &raftbusv1.SendEachResponse{}
	for _, m := range req.GetMessages() {
		ids = append(ids, m.GetMessage().GetMessageId())
		resp.Results = append(resp.Results, &raftbusv1.SendEachResult{Result: &raftbusv1.SendResult{SequenceNumber: 1}})
	}
	if err := d.apply(ctx, ids...); err != nil {
		return nil, err
	}
	if d.short {
		resp.Results = resp.Results[1:]
	}
	return resp, nil
}

func (d *dyingLeader) Send(ctx context.Context, req *raftbusv1.SendRequest) (*raftbusv1.SendResponse, error) {
	var ids []string
	resp := &raftbusv1.SendResponse{}
	for _, m := range req.GetMessages() {
		ids = append(ids, m.GetMessageId())
		resp.Results = append(resp.Results, &raftbusv1.SendResult{SequenceNumber: 1})
	}
	if err := d.apply(ctx, ids...); err != nil {
		return nil, err
	}
	if d.short {
		resp.Results = resp.Results[1:]
	}
	return resp, nil
}

// testTLS is a server and a client TLS configuration of a new CA.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := certs.Init(dir); err != nil {
		t.Fatal(err)
	}
	if err := certs.Issue(dir, certs.Node, "n1", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.CertFile("n1")), filepath.Join(dir, certs.KeyFile("n1")))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{Certificates: []tls.Certificate{pair}}, &tls.Config{RootCAs: pool}
}

func startDying(t *testing.T, d *dyingLeader, tlsConf *tls.Config) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.lis = &killable{Listener: l}
	d.addr = l.Addr().String()
	d.applied = map[string]int{}
	var opts []grpc.ServerOption
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	s := grpc.NewServer(opts...)
	raftbusv1.RegisterAdminServiceServer(s, d)
	raftbusv1.RegisterMessagingServiceServer(s, d)
	go s.Serve(d.lis)
	t.Cleanup(func() { d.lis.kill(); s.Stop() })
}

func dyingClient(t *testing.T, d *dyingLeader, tlsConf *tls.Config) *Client {
	t.Helper()
	c, err := New([]string{d.addr}, &ClientOptions{TLSConfig: tlsConf, RetryOptions: RetryOptions{MaxRetries: 3, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A leader that applies a send and dies before it answers (SIGKILL: the
// connection resets, the port refuses from then on). Whatever the retries
// meet afterwards, the send's outcome is unknown, never a failure, with
// TLS or without; and the error says where each attempt went.
func TestSendToALeaderKilledAfterApplyingIsUnknown(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		for _, repeatable := range []bool{false, true} {
			for range 5 {
				d := &dyingLeader{dies: func(ids []string) bool { return ids[0] != "warm" }}
				var srv, cl *tls.Config
				if withTLS {
					srv, cl = testTLS(t)
				}
				startDying(t, d, srv)
				c := dyingClient(t, d, cl)
				s, _ := c.NewSender("q", nil)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				// A connection in use, as a busy client has.
				if err := s.SendMessage(ctx, &Message{MessageID: "warm", Body: []byte("x")}, nil); err != nil {
					t.Fatal(err)
				}
				m := &Message{Body: []byte("x")}
				if repeatable {
					m.MessageID = "m"
				}
				err := s.SendMessage(ctx, m, nil)
				cancel()
				if d.appliedTimes(m.MessageID) != 1 {
					t.Fatalf("applied %d times", d.appliedTimes(m.MessageID))
				}
				var e *Error
				if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &e) {
					t.Fatalf("tls %v, repeatable %v: the send took effect, yet it failed with %v", withTLS, repeatable, err)
				}
				if !strings.Contains(err.Error(), "(node "+d.addr+")") {
					t.Errorf("%v does not name the node called", err)
				}
				if !repeatable {
					continue
				}
				// The send was repeated at the node, which was gone.
				a := e.Attempts()
				if len(a) < 2 || a[0].Node != d.addr || !a[0].MayHaveTakenEffect {
					t.Fatalf("attempts %+v: want the first at %s, which may have taken effect, then others", a, d.addr)
				}
				for _, later := range a[1:] {
					if later.MayHaveTakenEffect || !strings.Contains(later.Err, "node unreachable") {
						t.Errorf("later attempt %+v: want an unreachable node that did nothing", later)
					}
				}
				if !strings.Contains(err.Error(), "[attempts: 1) "+d.addr+", may have taken effect: raftbus: OUTCOME_UNKNOWN") {
					t.Errorf("%v does not carry the trail", err)
				}
			}
		}
	}
}

// A send whose call fails after it reached the leader with a status that
// no node answered (the stream reset, an answer that could not be read or
// did not match the request) may have taken effect: its outcome is
// unknown, not a failure.
func TestSendThatFailsAfterReachingTheLeaderIsUnknown(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(ids []string) error
	}{
		{"stream reset", func([]string) error {
			return status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR")
		}},
		{"unreadable answer", func([]string) error {
			return status.Error(codes.Internal, "grpc: failed to unmarshal the received message")
		}},
		{"unknown", func([]string) error { return status.Error(codes.Unknown, "stream reset") }},
	} {
		for _, repeatable := range []bool{false, true} {
			d := &dyingLeader{answer: c.answer}
			startDying(t, d, nil)
			cl := dyingClient(t, d, nil)
			s, _ := cl.NewSender("q", nil)
			m := &Message{Body: []byte("x")}
			if repeatable {
				m.MessageID = "m"
			}
			err := s.SendMessage(context.Background(), m, nil)
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Errorf("%s, repeatable %v: applied %d times, failed with %v; want an unknown outcome", c.name, repeatable, d.appliedTimes(m.MessageID), err)
			}
		}
	}
}

// A send whose results do not match its messages was taken by the
// broker: its outcome is unknown.
func TestSendWithMismatchedAnswerIsUnknown(t *testing.T) {
	d := &dyingLeader{short: true}
	startDying(t, d, nil)
	c := dyingClient(t, d, nil)
	s, _ := c.NewSender("q", nil)
	if err := s.SendMessage(context.Background(), &Message{Body: []byte("x")}, nil); !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("single send answered with no result: %v, want an unknown outcome", err)
	}
	b, _ := s.NewMessageBatch(context.Background(), nil)
	b.AddMessage(&Message{Body: []byte("x")}, nil)
	b.AddMessage(&Message{Body: []byte("y")}, nil)
	if err := s.SendMessageBatch(context.Background(), b, nil); !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("batch of two answered with one result: %v, want an unknown outcome", err)
	}
}

// A send that reached no node (the leader was down before it started, and
// the node that forwards said no leader was elected) failed: no needless
// unknown outcome, and the error says what each attempt met.
func TestSendThatReachedNoLeaderFailsWithItsTrail(t *testing.T) {
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := gone.Addr().String()
	gone.Close()
	busy := failure(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, true, "")
	f := &fakeNode{leader: func() string { return down }, duplicateDetection: true, failures: []error{busy, busy, busy, busy, busy, busy}}
	startFake(t, f)
	c := fastClient(t, f.addr)
	c.opts.RetryOptions.MaxRetries = 2
	s, _ := c.NewSender("q", nil)
	err = s.SendMessage(context.Background(), &Message{MessageID: "m", Body: []byte("x")}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeServerBusy {
		t.Fatalf("send: %v, want SERVER_BUSY", err)
	}
	a := e.Attempts()
	if len(a) != 3 || a[0].Node != down || !strings.Contains(a[0].Err, "node unreachable") {
		t.Fatalf("attempts %+v: want three, the first at the unreachable leader %s", a, down)
	}
	for _, x := range a {
		if x.MayHaveTakenEffect {
			t.Errorf("attempt %+v may have taken effect", x)
		}
	}
	for _, x := range a[1:] {
		if x.Node != f.addr {
			t.Errorf("attempt %+v: want it at the node that forwards, %s", x, f.addr)
		}
	}
}
