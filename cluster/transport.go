package cluster

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/cluster/access"
	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/internal/certs"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// interceptors are the node server's interceptors, outermost first.
type interceptors struct {
	// limit counts each connection's calls (a stats handler too).
	limit  *access.ConnLimit
	unary  []grpc.UnaryServerInterceptor
	stream []grpc.StreamServerInterceptor
}

// serverInterceptors are the bound on calls per connection, the access
// guard g when t is set, then the node's own.
func serverInterceptors(t *certs.NodeTLS, g *access.Guard, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) interceptors {
	limit := access.NewConnLimit(access.DefaultMaxCallsPerConn)
	out := interceptors{
		limit:  limit,
		unary:  append([]grpc.UnaryServerInterceptor{limit.Unary}, unary...),
		stream: append([]grpc.StreamServerInterceptor{limit.Stream}, stream...),
	}
	if t != nil {
		// The guard goes before the node's interceptors: a refused call
		// reaches nothing else.
		out.unary = append([]grpc.UnaryServerInterceptor{out.unary[0], g.Unary}, out.unary[1:]...)
		out.stream = append([]grpc.StreamServerInterceptor{out.stream[0], g.Stream}, out.stream[1:]...)
	}
	return out
}

// serverOptions are the options of the node's gRPC server: TLS when t is
// set, the interceptors, and the message size bounds.
func serverOptions(t *certs.NodeTLS, ic interceptors) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.StatsHandler(ic.limit),
		grpc.InitialWindowSize(raftbusv1.StreamWindow),
		grpc.InitialConnWindowSize(raftbusv1.ConnWindow),
		raftbusv1.ServerCodec(),
	}
	if t != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(t.Server)))
	}
	return append(opts, grpc.ChainUnaryInterceptor(ic.unary...), grpc.ChainStreamInterceptor(ic.stream...))
}

// chainUnary runs interceptors around a handler as the server chains
// them, outermost first: what a call served inside another (a grant of a
// ReceiveStream) goes through to be served as its unary call would be.
func chainUnary(interceptors []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		h := handler
		for i := len(interceptors) - 1; i >= 0; i-- {
			next, ic := h, interceptors[i]
			h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
		}
		return h(ctx, req)
	}
}

// peerCredentials are the transport credentials of the node's calls to
// its peers: mutual TLS with the node certificate when t is set.
func peerCredentials(t *certs.NodeTLS) credentials.TransportCredentials {
	if t == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(t.Peer)
}

// nodePolicies are the access policies in the node's metadata, for the
// access guard.
type nodePolicies struct{ n *Node }

func (p nodePolicies) AccessPolicy(entityPath, name string) (*raftbusv1.AccessPolicy, error) {
	// serving is set after meta: reading it first orders the two.
	if !p.n.serving.Load() {
		return nil, apierror.Busy("node %s is starting; try again", p.n.cfg.NodeID)
	}
	var out *raftbusv1.AccessPolicy
	var formed bool
	p.n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		out = meta.FindPolicy(s, entityPath, name)
		formed = meta.FindPolicy(s, "", meta.RootPolicyName) != nil
	})
	// A node that has not applied its metadata yet (just started, or
	// joined) must not refuse a key for good that it will know in a
	// moment: every formed cluster has the root policy.
	if out == nil && (!formed || p.n.metaBehind()) {
		return nil, apierror.Busy("node %s is catching up with the cluster's access policies; try again", p.n.cfg.NodeID)
	}
	return out, nil
}

// metaBehind reports whether this node's copy of the metadata may lack
// committed changes: no leader known, or entries committed and not yet
// applied.
func (n *Node) metaBehind() bool {
	if _, id := n.meta.raft.LeaderWithID(); id == "" {
		return true
	}
	return n.meta.raft.AppliedIndex() < n.meta.raft.CommitIndex()
}
