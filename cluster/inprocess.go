package cluster

import (
	"github.com/fullstorydev/grpchan/inprocgrpc"
	"google.golang.org/grpc"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// InProcess is a connection to the node's public services (messaging,
// admin, access) that stays in this process: a call goes through the
// node's interceptors to the service, as one over the network would,
// but without a socket, HTTP/2 or encoding in between (requests and
// answers are copied, so neither side shares memory with the other). The
// node's own front doors (AMQP, the web console) reach the node through
// it with a client whose other connections go to the other nodes. They
// check their own callers' rights, so the access guard is not on this
// path, as the node's certificate passes it on the network.
func (n *Node) InProcess() grpc.ClientConnInterface { return n.inProcess }

// newInProcess makes the node's in-process channel, calls going through
// unary and streams through stream; the services are registered on it
// with the server's.
func newInProcess(unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) *inprocgrpc.Channel {
	return (&inprocgrpc.Channel{}).WithServerUnaryInterceptor(unary).WithServerStreamInterceptor(stream)
}

// registerPublic registers the public services on r.
func registerPublic(r grpc.ServiceRegistrar, admin raftbusv1.AdminServiceServer, msg raftbusv1.MessagingServiceServer, access raftbusv1.AccessServiceServer) {
	raftbusv1.RegisterAdminServiceServer(r, admin)
	raftbusv1.RegisterMessagingServiceServer(r, msg)
	raftbusv1.RegisterAccessServiceServer(r, access)
}
