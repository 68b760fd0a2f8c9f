package access

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/raftbus/raftbus/cluster/apierror"
)

// DefaultMaxCallsPerConn bounds the public calls one client connection
// has in progress at once. The SDK gathers concurrent sends and
// settlements into few calls, so a client far below the bound keeps
// thousands of operations in flight; one that reaches it is told to slow
// down instead of tying up a goroutine and memory per call without end.
const DefaultMaxCallsPerConn = 4096

// ConnLimit bounds the calls in progress per connection: a stats.Handler
// that gives each connection a counter, and interceptors that count and
// refuse. Calls of the internal services (peers' Raft traffic, with a
// stream per group) are not bounded.
type ConnLimit struct {
	max int64
}

// NewConnLimit returns a limit of max calls in progress per connection.
func NewConnLimit(max int) *ConnLimit { return &ConnLimit{max: int64(max)} }

type connCounterKey struct{}

// TagConn gives the connection its counter.
func (l *ConnLimit) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connCounterKey{}, new(atomic.Int64))
}

func (l *ConnLimit) HandleConn(context.Context, stats.ConnStats)                     {}
func (l *ConnLimit) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (l *ConnLimit) HandleRPC(context.Context, stats.RPCStats)                       {}

// enter counts a call in; the returned func counts it out. It refuses the
// call with SERVER_BUSY past the bound.
func (l *ConnLimit) enter(ctx context.Context, method string) (func(), error) {
	n, _ := ctx.Value(connCounterKey{}).(*atomic.Int64)
	if n == nil || hasPrefix(method, internalPrefixes) {
		return func() {}, nil
	}
	if n.Add(1) > l.max {
		n.Add(-1)
		return nil, apierror.Status(apierror.Busy("this connection has %d calls in progress, the most a node serves on one connection: wait for some to end (or open another client)", l.max))
	}
	return func() { n.Add(-1) }, nil
}

// Unary is the limit as a unary server interceptor.
func (l *ConnLimit) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	exit, err := l.enter(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer exit()
	return handler(ctx, req)
}

// Stream is the limit as a stream server interceptor.
func (l *ConnLimit) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	exit, err := l.enter(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	defer exit()
	return handler(srv, ss)
}
