package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/amqp/servicebus"
	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/internal/certs"
)

// amqpPortOffset places the default AMQP listener: 127.0.0.1:5672 (the
// AMQP port) for a node on port 7400, 5673 for 7401, so that the nodes of
// a local cluster do not collide.
const amqpPortOffset = 5672 - 7400

// amqpFrontDoor is the node's AMQP 1.0 listener and what it holds.
type amqpFrontDoor struct {
	srv    *amqp.Server
	client *client.Client
	done   chan struct{}
}

// Close stops the listener, ends its connections and closes the client.
func (a *amqpFrontDoor) Close() {
	a.srv.Close()
	<-a.done
	a.client.Close()
}

// listenAMQP opens the AMQP listener for the Azure Service Bus SDKs, or
// none when --amqp is empty, before the node starts: a wrong or busy
// address fails the start at once. A listener at the default address
// that cannot listen is given up with a warning; one asked for fails the
// start.
func listenAMQP(opts options, nodeTLS *certs.NodeTLS, log *slog.Logger) (net.Listener, error) {
	addr, explicit := "", opts.AMQP != nil
	if explicit {
		addr = *opts.AMQP
	} else {
		addr = defaultAMQPAddr(opts.Listen)
	}
	if addr == "" {
		return nil, nil
	}
	// With --auth every client proves its rights with tokens (and TLS
	// is on); without, anyone who reaches the port can do anything.
	if !opts.Auth && !opts.Insecure && !loopbackOnly(addr) {
		return nil, fmt.Errorf("--amqp %s is reachable beyond this machine and the node checks no tokens: use a loopback address, --auth (with TLS), or --insecure on a network you trust", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		if !explicit {
			log.Warn("no AMQP listener: the default address is taken; set --amqp", "address", addr, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("--amqp: %w", err)
	}
	if nodeTLS != nil {
		// The SDKs present no client certificate: AMQP clients are told
		// apart by their tokens, not by certificates.
		serverTLS := nodeTLS.Server.Clone()
		serverTLS.ClientAuth = tls.NoClientCert
		// Whatever the gRPC port negotiates (h2) is not spoken here.
		serverTLS.NextProtos = nil
		lis = tls.NewListener(lis, serverTLS)
	}
	return lis, nil
}

// serveAMQP serves the listener once the node has started, through a
// client of the cluster that reaches this node in process and the others
// over the network, routing every call to the partition leader. It calls
// as the node itself, which passes every check of the access policies:
// with auth, the listener checks the tokens the clients put on $cbs
// against them before it calls the node.
func serveAMQP(lis net.Listener, node *cluster.Node, nodeTLS *certs.NodeTLS, auth bool, log *slog.Logger) (*amqpFrontDoor, error) {
	var peerTLS *tls.Config
	scheme := "amqp"
	if nodeTLS != nil {
		peerTLS, scheme = nodeTLS.Peer, "amqps"
	}
	c, err := client.New([]string{node.Addr()}, &client.ClientOptions{TLSConfig: peerTLS,
		InProcess: map[string]grpc.ClientConnInterface{node.Addr(): node.InProcess()}})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("--amqp: client of this node: %w", err)
	}
	h := &servicebus.Handler{Client: c, Log: log}
	if auth {
		h.Tokens = node.Guard()
	}
	a := &amqpFrontDoor{
		srv:    &amqp.Server{Handler: h, Log: log},
		client: c,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(lis); err != nil && !errors.Is(err, amqp.ErrServerClosed) {
			log.Error("AMQP listener failed", "err", err)
		}
	}()
	log.Info("serving AMQP 1.0 for the Azure Service Bus SDKs", "address", scheme+"://"+lis.Addr().String())
	return a, nil
}

// defaultAMQPAddr is loopback at the gRPC port plus amqpPortOffset.
func defaultAMQPAddr(listen string) string { return loopbackAt(listen, amqpPortOffset) }
