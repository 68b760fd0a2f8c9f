package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// fakeNode is a node of one entity whose partitions are either held here
// (replicas, some of them leading) or led by another node (leaders, by
// address), where a forwarded call meets answer. A method of Node that a
// test does not need panics (the embedded interface is nil).
type fakeNode struct {
	Node
	addr     string
	entity   *clusterv1.Entity
	replicas map[uint32]*fakeReplica
	leaders  map[uint32]string
	// answer answers a call forwarded to addr.
	answer func(addr, method string, req, reply any) error

	mu        sync.Mutex
	forwarded []forwardedCall
}

// forwardedCall is a call the services sent to another node.
type forwardedCall struct {
	addr, method string
	req          proto.Message
}

// newFakeNode is a node at 10.0.0.1:7400 that knows entity name with the
// given number of partitions, and no replica of any.
func newFakeNode(name string, partitions int) *fakeNode {
	e := &clusterv1.Entity{Name: name, Kind: clusterv1.EntityKind_ENTITY_KIND_QUEUE, Incarnation: 1, Queue: &raftbusv1.QueueProperties{Name: name}}
	for range partitions {
		e.Partitions = append(e.Partitions, &clusterv1.Placement{})
	}
	return &fakeNode{addr: "10.0.0.1:7400", entity: e, replicas: map[uint32]*fakeReplica{}, leaders: map[uint32]string{}}
}

func (n *fakeNode) Entity(_ context.Context, name string) (*clusterv1.Entity, error) {
	if name != n.entity.GetName() {
		return nil, apierror.NotFound("%q does not exist", name)
	}
	return n.entity, nil
}

func (n *fakeNode) Subscription(_ context.Context, topic, name string) (*clusterv1.Entity, *clusterv1.Subscription, error) {
	return nil, nil, apierror.NotFound("%s/subscriptions/%s does not exist", topic, name)
}

func (n *fakeNode) Route(ctx context.Context, e *clusterv1.Entity, id uint32, _ routing.Repeat,
	local func(r Replica) error, remote func(ctx context.Context, conn grpc.ClientConnInterface) error,
) error {
	if r := n.replicas[id]; r != nil && r.leader {
		return local(r)
	}
	if addr := n.leaders[id]; addr != "" {
		return remote(ctx, fakeConn{n: n, addr: addr})
	}
	return apierror.Busy("partition %d of %s has no reachable leader", id, e.GetName())
}

func (n *fakeNode) Replica(_ *clusterv1.Entity, id uint32) Replica {
	if r := n.replicas[id]; r != nil {
		return r
	}
	return nil
}

func (n *fakeNode) Call(ctx context.Context, addr string, call func(ctx context.Context, conn grpc.ClientConnInterface) error) error {
	return call(ctx, fakeConn{n: n, addr: addr})
}

func (n *fakeNode) Addr() string { return n.addr }

func (n *fakeNode) Stopping() <-chan struct{} { return nil }

func (n *fakeNode) calls() []forwardedCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]forwardedCall(nil), n.forwarded...)
}

// fakeConn is the connection to the node at addr: it records each call
// and has the node's answer answer it.
type fakeConn struct {
	n    *fakeNode
	addr string
}

func (c fakeConn) Invoke(_ context.Context, method string, req, reply any, _ ...grpc.CallOption) error {
	c.n.mu.Lock()
	c.n.forwarded = append(c.n.forwarded, forwardedCall{addr: c.addr, method: method, req: proto.Clone(req.(proto.Message))})
	c.n.mu.Unlock()
	if c.n.answer == nil {
		return apierror.Busy("node %s is unreachable", c.addr)
	}
	return c.n.answer(c.addr, method, req, reply)
}

func (c fakeConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("the services open no streams")
}

// fakeReplica is one partition replica: it records the commands applied
// to it and answers them with result.
type fakeReplica struct {
	name       string
	leader     bool
	leaderAddr string
	available  bool
	// oldest is the enqueue time of its oldest available message, when
	// available (a follower's view included).
	oldest int64
	result func(cmd *enginev1.Command) (*enginev1.Result, error)

	mu      sync.Mutex
	applied []*enginev1.Command
}

func (r *fakeReplica) Name() string                              { return r.name }
func (r *fakeReplica) IsLeader() bool                            { return r.leader }
func (r *fakeReplica) Leader() (string, string)                  { return r.leaderAddr, "" }
func (r *fakeReplica) Ready() bool                               { return true }
func (r *fakeReplica) Available(string, raftbusv1.SubQueue) bool { return r.available }
func (r *fakeReplica) Changes() <-chan struct{}                  { return nil }
func (r *fakeReplica) OldestAvailable(string, raftbusv1.SubQueue) (int64, bool) {
	return r.oldest, r.available
}
func (r *fakeReplica) Now() (int64, error) { return 0, nil }

func (r *fakeReplica) Apply(_ context.Context, cmd *enginev1.Command) (*enginev1.Result, error) {
	r.mu.Lock()
	r.applied = append(r.applied, cmd)
	r.mu.Unlock()
	if r.result == nil {
		return &enginev1.Result{}, nil
	}
	return r.result(cmd)
}

func (r *fakeReplica) ApplyAll(ctx context.Context, cmds []*enginev1.Command) []partition.Applied {
	out := make([]partition.Applied, len(cmds))
	for i, cmd := range cmds {
		out[i].Result, out[i].Err = r.Apply(ctx, cmd)
	}
	return out
}

func (r *fakeReplica) Receive(context.Context, *enginev1.Lock, time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	return nil, nil
}

func (r *fakeReplica) AcceptSession(context.Context, *enginev1.AcceptSession, time.Duration) (*enginev1.AcceptSessionResult, error) {
	return &enginev1.AcceptSessionResult{}, nil
}

func (r *fakeReplica) Read(context.Context, func(*engine.Engine)) error {
	return apierror.Busy("a fake replica has no engine to read")
}

func (r *fakeReplica) commands() []*enginev1.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*enginev1.Command(nil), r.applied...)
}

// lead makes this node hold and lead partitions ids of n's entity.
func (n *fakeNode) lead(ids ...uint32) {
	for _, id := range ids {
		n.replicas[id] = &fakeReplica{name: fmt.Sprintf("%s@1/%d", n.entity.GetName(), id), leader: true}
	}
}

// serve serves the public services of node, as a node's server does
// (with the status interceptor), and returns clients of them.
func serve(t *testing.T, node Node) (raftbusv1.AdminServiceClient, raftbusv1.MessagingServiceClient) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(StatusInterceptor(slog.New(slog.DiscardHandler))))
	raftbusv1.RegisterAdminServiceServer(srv, NewAdmin(node, Config{DefaultPartitions: 1}))
	raftbusv1.RegisterMessagingServiceServer(srv, NewMessaging(node))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///fake", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return raftbusv1.NewAdminServiceClient(conn), raftbusv1.NewMessagingServiceClient(conn)
}
