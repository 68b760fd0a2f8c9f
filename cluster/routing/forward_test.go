package routing

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// node is a node on an in-memory network that answers Send with answer,
// and counts the Sends it got and whether each refused forwarding.
type node struct {
	raftbusv1.UnimplementedMessagingServiceServer
	answer func() error

	mu        sync.Mutex
	sends     int
	noForward int
}

func (n *node) Send(ctx context.Context, _ *raftbusv1.SendRequest) (*raftbusv1.SendResponse, error) {
	n.mu.Lock()
	n.sends++
	if Forwarded(ctx) {
		n.noForward++
	}
	n.mu.Unlock()
	if err := n.answer(); err != nil {
		return nil, apierror.Status(err)
	}
	return &raftbusv1.SendResponse{}, nil
}

// network serves nodes by address and returns Peers that reach them.
func network(t *testing.T, nodes map[string]*node) *Peers {
	t.Helper()
	listeners := map[string]*bufconn.Listener{}
	for addr, n := range nodes {
		lis := bufconn.Listen(1 << 20)
		srv := grpc.NewServer()
		raftbusv1.RegisterMessagingServiceServer(srv, n)
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		listeners[addr] = lis
	}
	peers := NewPeers(grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			lis, ok := listeners[addr]
			if !ok {
				return nil, errors.New("connection refused")
			}
			return lis.DialContext(ctx)
		}))
	t.Cleanup(peers.Close)
	return peers
}

func send(ctx context.Context, conn grpc.ClientConnInterface) error {
	_, err := raftbusv1.NewMessagingServiceClient(conn).Send(ctx, &raftbusv1.SendRequest{})
	return err
}

// A node that does not lead the partition names the one that does; the
// call goes there, refusing a further hop, and the leader is remembered.
func TestForwardFollowsTheLeaderHint(t *testing.T) {
	notLeader := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "n2 leads")
	notLeader.Leader = &raftbusv1.LeaderHint{NodeId: "n2", Address: "10.0.0.2:7400"}
	follower := &node{answer: func() error { return notLeader }}
	leader := &node{answer: func() error { return nil }}
	peers := network(t, map[string]*node{"10.0.0.1:7400": follower, "10.0.0.2:7400": leader})
	leaders := NewLeaders()
	if err := Forward(context.Background(), peers, leaders, "orders@1/0", []string{"10.0.0.1:7400"}, Once, send); err != nil {
		t.Fatalf("forward: %v", err)
	}
	if follower.sends != 1 || leader.sends != 1 || follower.noForward != 1 || leader.noForward != 1 {
		t.Fatalf("follower asked %d times, leader %d (refusing forwarding: %d, %d); want once each, forwarding refused",
			follower.sends, leader.sends, follower.noForward, leader.noForward)
	}
	if got := leaders.Get("orders@1/0"); got != "10.0.0.2:7400" {
		t.Fatalf("the leader remembered is %q, want 10.0.0.2:7400", got)
	}
}

// An unknown outcome ends a call that must not be repeated; one that may
// be repeated is asked again, and when the repeat fails the caller still
// learns that the outcome is unknown.
func TestForwardKeepsAnUnknownOutcomeUnknown(t *testing.T) {
	unknown := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "leadership lost while committing")
	lockLost := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST, "no such lock")
	for _, c := range []struct {
		name  string
		rep   Repeat
		sends int
	}{
		{"once", Once, 1},
		{"idempotent", Idempotent, 2},
	} {
		calls := 0
		leader := &node{answer: func() error {
			calls++
			if calls == 1 {
				return unknown
			}
			return lockLost // the first settled it
		}}
		peers := network(t, map[string]*node{"10.0.0.1:7400": leader})
		err := Forward(context.Background(), peers, NewLeaders(), "orders@1/0", []string{"10.0.0.1:7400"}, c.rep, send)
		if !apierror.IsUnknownOutcome(err) || leader.sends != c.sends {
			t.Errorf("%s: %v after %d sends; want OUTCOME_UNKNOWN after %d", c.name, err, leader.sends, c.sends)
		}
	}
}

// A batch answered as a whole (its items failing one by one) by a node
// that does not lead, after an attempt whose outcome is unknown: the
// items' NOT_LEADER says they were not done there, not that they were not
// done at all, so the caller hears OUTCOME_UNKNOWN for them. (A follower's
// per-item NOT_LEADER once turned a committed settlement into a failure.)
func TestForwardedBatchAfterAnUnknownOutcomeIsUnknownItemByItem(t *testing.T) {
	unknown := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "leadership lost while committing")
	calls := 0
	n := &node{answer: func() error {
		calls++
		if calls == 1 {
			return unknown
		}
		return nil // the batch answered as a whole
	}}
	peers := network(t, map[string]*node{"10.0.0.1:7400": n})
	notLeader := apierror.Info(apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "not the leader"))
	lockLost := apierror.Info(apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST, "no such lock"))
	var items []*raftbusv1.ErrorInfo
	var after []bool
	err := Forward(context.Background(), peers, NewLeaders(), "orders@1/0", []string{"10.0.0.1:7400"}, Idempotent,
		func(ctx context.Context, conn grpc.ClientConnInterface) error {
			after = append(after, AfterUnknown(ctx))
			if err := send(ctx, conn); err != nil {
				return err
			}
			items = []*raftbusv1.ErrorInfo{ItemFailure(ctx, notLeader), ItemFailure(ctx, lockLost), ItemFailure(ctx, nil)}
			return nil
		})
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	if len(after) != 2 || after[0] || !after[1] {
		t.Fatalf("AfterUnknown by attempt: %v, want [false true]", after)
	}
	if items[0].GetReason() != raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN || items[1] != lockLost || items[2] != nil {
		t.Fatalf("items after an unknown outcome: %v; want OUTCOME_UNKNOWN, the lock loss as it was, success", items)
	}
	if got := ItemFailure(context.Background(), notLeader); got != notLeader {
		t.Fatalf("a first attempt's NOT_LEADER became %v", got)
	}
}

// A node that cannot be reached did nothing: the call goes to the next.
func TestForwardSkipsANodeThatIsDown(t *testing.T) {
	leader := &node{answer: func() error { return nil }}
	peers := network(t, map[string]*node{"10.0.0.2:7400": leader})
	if err := Forward(context.Background(), peers, NewLeaders(), "orders@1/0", []string{"10.0.0.1:7400", "10.0.0.2:7400"}, Once, send); err != nil || leader.sends != 1 {
		t.Fatalf("forward past a node that is down: %v, leader asked %d times", err, leader.sends)
	}
}

// rawNode answers Send with a gRPC status of its own, without the
// ErrorInfo of a node's answer: what a call meets when its stream fails
// after the node handled it (reset, an answer that cannot be read).
type rawNode struct {
	raftbusv1.UnimplementedMessagingServiceServer
	answer func() error
	mu     sync.Mutex
	sends  int
}

func (n *rawNode) Send(ctx context.Context, _ *raftbusv1.SendRequest) (*raftbusv1.SendResponse, error) {
	n.mu.Lock()
	n.sends++
	n.mu.Unlock()
	if err := n.answer(); err != nil {
		return nil, err
	}
	return &raftbusv1.SendResponse{}, nil
}

func rawNetwork(t *testing.T, addr string, n *rawNode) *Peers {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	raftbusv1.RegisterMessagingServiceServer(srv, n)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	peers := NewPeers(grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			if a != addr {
				return nil, errors.New("connection refused")
			}
			return lis.DialContext(ctx)
		}))
	t.Cleanup(peers.Close)
	return peers
}

// A forwarded call whose stream fails after it reached the leader, with a
// status no node answered, may have taken effect: the forwarding node
// must not report it as a failure, however the later attempts go.
func TestForwardedCallThatFailsAfterReachingTheLeaderIsUnknown(t *testing.T) {
	for _, c := range []struct {
		name  string
		rep   Repeat
		sends int
	}{
		{"once", Once, 1},
		{"idempotent", Idempotent, 2},
	} {
		calls := 0
		leader := &rawNode{answer: func() error {
			calls++
			if calls == 1 {
				return status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR")
			}
			return apierror.Status(apierror.Busy("partition orders@1/0: no leader is elected yet"))
		}}
		peers := rawNetwork(t, "10.0.0.1:7400", leader)
		err := Forward(context.Background(), peers, NewLeaders(), "orders@1/0", []string{"10.0.0.1:7400", "10.0.0.2:7400"}, c.rep, send)
		if !apierror.IsUnknownOutcome(err) || leader.sends != c.sends {
			t.Errorf("%s: %v after %d sends; want OUTCOME_UNKNOWN after %d", c.name, err, leader.sends, c.sends)
		}
	}
}

// A status no node answered that says the call was refused before it was
// handled stays what it is.
func TestForwardErrorKeepsRefusals(t *testing.T) {
	for _, code := range []codes.Code{codes.Unimplemented, codes.ResourceExhausted, codes.PermissionDenied} {
		err := status.Error(code, "refused")
		if got := ForwardError(err, "10.0.0.1:7400", true); got != err {
			t.Errorf("%v: %v, want it unchanged", code, got)
		}
	}
	if got := ForwardError(status.Error(codes.Internal, "reset"), "10.0.0.1:7400", false); apierror.IsUnknownOutcome(got) {
		t.Errorf("a call that never left: %v, want no unknown outcome", got)
	}
}

// The failure of a call forwarded several times names every attempt, so
// that the client's error tells where the request went.
func TestForwardFailureNamesEveryAttempt(t *testing.T) {
	calls := 0
	leader := &node{answer: func() error {
		calls++
		if calls == 1 {
			return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "leadership lost while committing")
		}
		return apierror.Busy("no leader is elected yet")
	}}
	peers := network(t, map[string]*node{"10.0.0.1:7400": leader})
	err := Forward(context.Background(), peers, NewLeaders(), "orders@1/0", []string{"10.0.0.1:7400", "10.0.0.9:7400"}, Idempotent, send)
	if !apierror.IsUnknownOutcome(err) {
		t.Fatalf("forward: %v, want OUTCOME_UNKNOWN", err)
	}
	msg := apierror.From(err).Message
	for _, want := range []string{"[forwarded: 1) 10.0.0.1:7400: OUTCOME_UNKNOWN", "2) 10.0.0.1:7400: SERVER_BUSY", "3) 10.0.0.9:7400: SERVER_BUSY: node 10.0.0.9:7400 is unreachable"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// A call that went once says no more than its failure.
	peers = network(t, map[string]*node{"10.0.0.1:7400": {answer: func() error { return apierror.Invalid("bad request") }}})
	err = Forward(context.Background(), peers, NewLeaders(), "orders@1/0", []string{"10.0.0.1:7400"}, Once, send)
	if msg := apierror.From(err).Message; msg != "bad request" {
		t.Errorf("single attempt: %q, want the failure alone", msg)
	}
}
