package cluster

import (
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/cluster/access"
	"github.com/raftbus/raftbus/internal/certs"
)

// serverOptions are the options of the node's gRPC server: TLS and the
// access guard (before anything else) when t is set, then the node's
// interceptors, and the message size bounds.
func serverOptions(t *certs.NodeTLS, log *slog.Logger, unary []grpc.UnaryServerInterceptor) []grpc.ServerOption {
	var stream []grpc.StreamServerInterceptor
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
	}
	if t != nil {
		// The guard goes first: a refused call reaches nothing else.
		g := access.NewGuard(log)
		unary = append([]grpc.UnaryServerInterceptor{g.Unary}, unary...)
		stream = append(stream, g.Stream)
		opts = append(opts, grpc.Creds(credentials.NewTLS(t.Server)))
	}
	return append(opts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
}

// peerCredentials are the transport credentials of the node's calls to
// its peers: mutual TLS with the node certificate when t is set.
func peerCredentials(t *certs.NodeTLS) credentials.TransportCredentials {
	if t == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(t.Peer)
}
