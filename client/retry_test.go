package client

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// fakeNode is a scripted server: its routing table names leader as the
// leader of every entity's single partition, and each Send or SendEach
// answers with the next of failures (nil: success).
type fakeNode struct {
	raftbusv1.UnimplementedAdminServiceServer
	raftbusv1.UnimplementedMessagingServiceServer
	addr     string
	leader   func() string
	failures []error
	sends    atomic.Int32
	// duplicateDetection is what the routing table says of every entity.
	duplicateDetection bool
	// routingDown makes GetRoutingTable fail, as a cluster going down does.
	routingDown atomic.Bool
	// onSendEach runs as each SendEach arrives.
	onSendEach func(*raftbusv1.SendEachRequest)
	// partitions, when set, are the leader addresses of every entity's
	// partitions, in order; else it has one, led by leader().
	partitions func() []string
}

func (f *fakeNode) GetRoutingTable(ctx context.Context, req *raftbusv1.GetRoutingTableRequest) (*raftbusv1.GetRoutingTableResponse, error) {
	if f.routingDown.Load() {
		return nil, failure(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, true, "")
	}
	leaders := []string{f.leader()}
	if f.partitions != nil {
		leaders = f.partitions()
	}
	route := &raftbusv1.EntityRoute{EntityPath: req.GetEntityPath(), PartitionCount: uint32(len(leaders)), RequiresDuplicateDetection: f.duplicateDetection}
	for i, addr := range leaders {
		route.Partitions = append(route.Partitions, &raftbusv1.PartitionRoute{PartitionId: uint32(i), LeaderAddress: addr})
	}
	return &raftbusv1.GetRoutingTableResponse{Entities: []*raftbusv1.EntityRoute{route}}, nil
}

func (f *fakeNode) Send(ctx context.Context, req *raftbusv1.SendRequest) (*raftbusv1.SendResponse, error) {
	n := int(f.sends.Add(1)) - 1
	if n < len(f.failures) && f.failures[n] != nil {
		return nil, f.failures[n]
	}
	return &raftbusv1.SendResponse{Results: []*raftbusv1.SendResult{{SequenceNumber: 1}}}, nil
}

// SendEach answers as Send does, for the request as a whole.
func (f *fakeNode) SendEach(ctx context.Context, req *raftbusv1.SendEachRequest) (*raftbusv1.SendEachResponse, error) {
	if f.onSendEach != nil {
		f.onSendEach(req)
	}
	n := int(f.sends.Add(1)) - 1
	if n < len(f.failures) && f.failures[n] != nil {
		return nil, f.failures[n]
	}
	resp := &raftbusv1.SendEachResponse{}
	for range req.GetMessages() {
		resp.Results = append(resp.Results, &raftbusv1.SendEachResult{Result: &raftbusv1.SendResult{SequenceNumber: 1}})
	}
	return resp, nil
}

func startFake(t *testing.T, f *fakeNode) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	if f.leader == nil {
		f.leader = func() string { return f.addr }
	}
	s := grpc.NewServer()
	raftbusv1.RegisterAdminServiceServer(s, f)
	raftbusv1.RegisterMessagingServiceServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

func failure(reason raftbusv1.ErrorReason, retryable bool, leader string) error {
	st, _ := status.New(codes.Unavailable, "scripted").WithDetails(&raftbusv1.ErrorInfo{
		Reason: reason, Message: "scripted " + reason.String(), Retryable: retryable, TrackingId: "t-1",
		Leader: &raftbusv1.LeaderHint{Address: leader},
	})
	return st.Err()
}

func fastClient(t *testing.T, addr string) *Client {
	c, err := New([]string{addr}, &ClientOptions{RetryOptions: RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSendOfUnknownOutcomeIsRetriedOnlyWithMessageIDsAndDuplicateDetection(t *testing.T) {
	unknown := failure(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, true, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name               string
		id                 string
		duplicateDetection bool
		repeated           bool
	}{
		{"no id", "", true, false},
		{"id without duplicate detection", "m1", false, false},
		{"id with duplicate detection", "m1", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNode{failures: []error{unknown}, duplicateDetection: tc.duplicateDetection}
			startFake(t, f)
			s, _ := fastClient(t, f.addr).NewSender("q", nil)
			err := s.SendMessage(ctx, &Message{MessageID: tc.id, Body: []byte("x")}, nil)
			if tc.repeated {
				if err != nil || f.sends.Load() != 2 {
					t.Fatalf("send: %v after %d calls, want success after a repeat", err, f.sends.Load())
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeOutcomeUnknown || e.TrackingID != "t-1" || !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("send: %v, want the outcome-unknown error", err)
			}
			if f.sends.Load() != 1 {
				t.Fatalf("the send was repeated: %d calls", f.sends.Load())
			}
		})
	}
}

// A coalesced send whose request had an unknown outcome stays unknown
// when every later attempt fails before reaching a node (here: the
// routing table cannot be had), though those failures say nothing was
// sent.
func TestUnknownCoalescedSendStaysUnknownWhenTheRetriesGetNowhere(t *testing.T) {
	unknown := failure(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, true, "")
	f := &fakeNode{failures: []error{unknown}, duplicateDetection: true}
	startFake(t, f)
	c := fastClient(t, f.addr)
	f.onSendEach = func(*raftbusv1.SendEachRequest) {
		// The cluster goes down as the request is served: other calls
		// find the routing table stale, and it cannot be fetched again.
		f.routingDown.Store(true)
		c.routes.forget(routeKey("q"))
	}
	s, _ := c.NewSender("q", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.SendMessage(ctx, &Message{MessageID: "m1", Body: []byte("x")}, nil)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("send: %v, want the outcome-unknown error of the first attempt", err)
	}
	if f.sends.Load() != 1 {
		t.Fatalf("%d calls reached the node, want the one", f.sends.Load())
	}
}

func TestNotLeaderHintIsFollowed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader := &fakeNode{}
	startFake(t, leader)
	// The stale node names itself leader in its table but refuses, naming
	// the real leader.
	stale := &fakeNode{}
	startFake(t, stale)
	stale.failures = []error{failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, true, leader.addr)}

	s, _ := fastClient(t, stale.addr).NewSender("q", nil)
	for i := range 3 {
		if err := s.SendMessage(ctx, &Message{Body: []byte("x")}, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if stale.sends.Load() != 1 || leader.sends.Load() != 3 {
		t.Fatalf("stale node got %d sends, leader %d; want 1 and 3 (hint cached)", stale.sends.Load(), leader.sends.Load())
	}
}

func TestRetriesEndWithTheCallersContext(t *testing.T) {
	busy := failure(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, true, "")
	f := &fakeNode{failures: make([]error, 1000)}
	for i := range f.failures {
		f.failures[i] = busy
	}
	startFake(t, f)
	c, err := New([]string{f.addr}, &ClientOptions{RetryOptions: RetryOptions{MaxRetries: 1000, RetryDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, _ := c.NewSender("q", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = s.SendMessage(ctx, &Message{Body: []byte("x")}, nil)
	// The last failure is the busy node's, or, when the deadline cut an
	// attempt short, that attempt's unknown outcome.
	var e *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Code != CodeServerBusy && e.Code != CodeOutcomeUnknown {
		t.Fatalf("send to a busy node: %v, want the deadline with the last failure", err)
	}
	if n := f.sends.Load(); n < 3 {
		t.Fatalf("only %d attempts before the deadline", n)
	}
}

// The deadline may come while an attempt waits for the routing table
// (a busy node makes the client look for the leader again): the caller
// still hears of the failure that kept it retrying.
func TestADeadlineMetLookingForTheLeaderCarriesTheLastFailure(t *testing.T) {
	c := fastClient(t, "127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	err := c.retry(ctx, true, func(ctx context.Context, attempt int) error {
		attempts++
		if attempts == 1 {
			return &Error{Code: CodeServerBusy, Retryable: true, Message: "no leader"}
		}
		cancel()
		return ctx.Err() // as routingTable.lookup returns it
	})
	var e *Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || e.Code != CodeServerBusy {
		t.Fatalf("after %d attempts: %v, want canceled with the busy node's failure", attempts, err)
	}
	// With no failure before it, the context's error is all there is.
	err = c.retry(ctx, true, func(ctx context.Context, attempt int) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) || errors.As(err, &e) {
		t.Fatalf("first attempt cut short: %v, want the context's error alone", err)
	}
}

func TestACallCutShortByTheDeadlineWaitsForTheCallersContext(t *testing.T) {
	cut := &Error{Code: CodeOutcomeUnknown, Status: codes.Canceled}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	awaitOwnDeadline(ctx, cut)
	if ctx.Err() == nil {
		t.Fatal("returned before the caller's deadline, which had cut the call short")
	}
	far, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, e := range []*Error{cut, {Code: CodeOutcomeUnknown, Status: codes.Unavailable}} {
		start := time.Now()
		awaitOwnDeadline(far, e)
		if time.Since(start) > time.Second {
			t.Fatalf("waited %v for a deadline a minute away (%v)", time.Since(start), e.Status)
		}
	}
}

// The server runs out the caller's deadline (sent with the call) a moment
// before the caller's own context does.
func TestDeadlineRunOutByTheServerIsTheDeadline(t *testing.T) {
	f := &fakeNode{failures: []error{nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")}}
	startFake(t, f)
	s, _ := fastClient(t, f.addr).NewSender("q", nil)
	// A first send looks the route up and connects, so that the short
	// deadline below is spent on the send alone, however loaded the
	// machine.
	if err := s.SendMessage(context.Background(), &Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer cancel()
	err := s.SendMessage(ctx, &Message{Body: []byte("x")}, nil)
	var e *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Code != CodeOutcomeUnknown {
		t.Fatalf("send the server timed out: %v, want OUTCOME_UNKNOWN that is context.DeadlineExceeded", err)
	}
	if errors.Is(&Error{Code: CodeOutcomeUnknown, Status: codes.Unavailable}, context.DeadlineExceeded) {
		t.Fatal("a broken connection is not a deadline")
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	o := RetryOptions{RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}.withDefaults()
	for n, base := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		for range 20 {
			d := o.delay(n)
			if d < base/2 || d >= base*3/2 {
				t.Fatalf("delay %d = %v, want in [%v, %v)", n, d, base/2, base*3/2)
			}
		}
	}
}

func TestLockLostAfterAnUnknownOutcomeIsReportedUnknown(t *testing.T) {
	c := fastClient(t, "127.0.0.1:1")
	attempts := 0
	err := c.retry(context.Background(), true, func(context.Context, int) error {
		attempts++
		if attempts == 1 {
			// The settlement may have been applied before the answer was lost.
			return &Error{Code: CodeOutcomeUnknown, Retryable: true, Message: "leadership changed"}
		}
		return &Error{Code: CodeLockLost, Message: "lock token is unknown"}
	})
	if !errors.Is(err, ErrOutcomeUnknown) || attempts != 2 {
		t.Fatalf("after %d attempts: %v, want the unknown outcome of the first", attempts, err)
	}
	// Without an unknown outcome before it, a lost lock is what it says.
	err = c.retry(context.Background(), true, func(context.Context, int) error {
		return &Error{Code: CodeLockLost, Message: "lock token is unknown"}
	})
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("plain lost lock: %v", err)
	}
}

func TestEveryFailureAfterAnUnknownOutcomeIsReportedUnknown(t *testing.T) {
	c := fastClient(t, "127.0.0.1:1")
	unknown := &Error{Code: CodeOutcomeUnknown, Retryable: true, Message: "connection broke after the request was sent"}
	for _, tc := range []struct {
		name  string
		later *Error
	}{
		{"entity gone", &Error{Code: CodeNotFound, Message: "entity does not exist"}},
		{"retries spent on a busy node", &Error{Code: CodeServerBusy, Retryable: true, Message: "no leader"}},
		{"not leader", &Error{Code: CodeNotLeader, Retryable: true, Message: "not the leader"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attempts := 0
			err := c.retry(context.Background(), true, func(context.Context, int) error {
				attempts++
				if attempts == 1 {
					return unknown
				}
				return tc.later
			})
			if !errors.Is(err, ErrOutcomeUnknown) || attempts < 2 {
				t.Fatalf("after %d attempts: %v, want the unknown outcome of the first", attempts, err)
			}
			// Without the unknown outcome first, the failure is what it says.
			if err := c.retry(context.Background(), true, func(context.Context, int) error { return tc.later }); errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("plain %v reported as %v", tc.later, err)
			}
		})
	}
	t.Run("caller gives up", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		attempts := 0
		err := c.retry(ctx, true, func(context.Context, int) error {
			attempts++
			if attempts == 1 {
				return unknown
			}
			cancel()
			return &Error{Code: CodeServerBusy, Retryable: true, Message: "no leader"}
		})
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
			t.Fatalf("after %d attempts: %v, want canceled with the unknown outcome", attempts, err)
		}
	})
}

// A leader the cluster reaches but the client does not (its advertised
// address does not resolve or connect from here) is served through
// another node, which forwards.
func TestUnreachableLeaderIsServedThroughAnotherNode(t *testing.T) {
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := gone.Addr().String()
	gone.Close()
	f := &fakeNode{leader: func() string { return unreachable }}
	startFake(t, f)
	c := fastClient(t, f.addr)
	s, _ := c.NewSender("q", nil)
	for range 3 {
		if err := s.SendMessage(context.Background(), &Message{Body: []byte("x")}, nil); err != nil {
			t.Fatalf("send with an unreachable leader: %v", err)
		}
	}
	if n := f.sends.Load(); n != 3 {
		t.Fatalf("the reachable node served %d sends, want 3", n)
	}
	if !c.avoided(unreachable) {
		t.Fatal("the unreachable leader is not remembered")
	}
}
