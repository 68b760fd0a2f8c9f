package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/internal/certs"
	"github.com/raftbus/raftbus/mgmtapi"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// managementPortOffset places the default management listener:
// 127.0.0.1:5300 for a node on port 7400 (the port of the Service Bus
// emulator's management API), 5301 for 7401.
const managementPortOffset = 5300 - 7400

// managementFrontDoor is the node's listener of the Service Bus
// management REST API.
type managementFrontDoor struct {
	srv  *http.Server
	done chan struct{}
}

// Close stops the listener, letting requests in flight finish for a
// moment: they are calls the node answers quickly or not at all.
func (m *managementFrontDoor) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	<-m.done
}

// listenManagement opens the listener of the management REST API for
// the SDKs' administration clients, or none when --management is empty,
// before the node starts, as listenAMQP does and by the same rules: off
// loopback it needs --auth or --insecure; a default address that is
// taken is given up with a warning, one asked for fails the start. With
// TLS it serves the node's certificate and asks for none (the SDKs are
// told apart by their tokens).
func listenManagement(opts options, nodeTLS *certs.NodeTLS, log *slog.Logger) (net.Listener, error) {
	addr, explicit := "", opts.Management != nil
	if explicit {
		addr = *opts.Management
	} else {
		addr = loopbackAt(opts.Listen, managementPortOffset)
	}
	if addr == "" {
		return nil, nil
	}
	if !opts.Auth && !opts.Insecure && !loopbackOnly(addr) {
		return nil, fmt.Errorf("--management %s is reachable beyond this machine and the node checks no tokens: use a loopback address, --auth (with TLS), or --insecure on a network you trust", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		if !explicit {
			log.Warn("no management listener: the default address is taken; set --management", "address", addr, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("--management: %w", err)
	}
	if nodeTLS != nil {
		serverTLS := nodeTLS.Server.Clone()
		serverTLS.ClientAuth = tls.NoClientCert
		serverTLS.NextProtos = []string{"http/1.1"}
		lis = tls.NewListener(lis, serverTLS)
	}
	return lis, nil
}

// serveManagement serves the listener once the node has started. The
// handler calls the admin service as the node itself, which passes
// every check: with auth it checks each request's token first.
func serveManagement(lis net.Listener, node *cluster.Node, nodeTLS *certs.NodeTLS, auth bool, log *slog.Logger) *managementFrontDoor {
	cfg := mgmtapi.Config{Admin: raftbusv1.NewAdminServiceClient(node.InProcess()), Log: log}
	if auth {
		cfg.Tokens = node.Guard()
	}
	m := &managementFrontDoor{
		srv: &http.Server{
			Handler:           mgmtapi.New(cfg),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("management listener failed", "err", err)
		}
	}()
	scheme := "http"
	if nodeTLS != nil {
		scheme = "https"
	}
	log.Info("serving the Service Bus management API for the SDKs' administration clients", "address", scheme+"://"+lis.Addr().String())
	return m
}

// loopbackAt is loopback at the port of listen plus offset (port 0, any
// free one, when that port is 0 or the sum is no port): where a node's
// other listeners go by default, so that the nodes of a local cluster do
// not collide.
func loopbackAt(listen string, offset int) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "127.0.0.1:0"
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p+offset <= 0 || p+offset > 65535 {
		return "127.0.0.1:0"
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p+offset))
}
