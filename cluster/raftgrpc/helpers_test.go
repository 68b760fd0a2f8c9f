package raftgrpc

import (
	"net"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
)

// testNode is one node's gRPC server on 127.0.0.1 with its Mux.
type testNode struct {
	mux    *Mux
	server *grpc.Server
	addr   raft.ServerAddress
}

// startNode starts a node; t.Cleanup closes its Mux, then stops its server
// and waits for Serve to return.
func startNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	return startNodeAt(t, "127.0.0.1:0", cfg)
}

// startNodeAt is startNode listening on addr.
func startNodeAt(t testing.TB, addr string, cfg Config) *testNode {
	t.Helper()
	return startNodeWith(t, addr, cfg, func(m *Mux, s *grpc.Server) { m.Register(s) })
}

// startNodeWith is startNodeAt with register putting the Mux's service on
// the server (in a test's own way).
func startNodeWith(t testing.TB, addr string, cfg Config, register func(*Mux, *grpc.Server), opts ...grpc.ServerOption) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cfg.LocalAddr = raft.ServerAddress(lis.Addr().String())
	mux, err := NewMux(cfg)
	if err != nil {
		t.Fatalf("new mux: %v", err)
	}
	server := grpc.NewServer(opts...)
	register(mux, server)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = server.Serve(lis)
	}()
	t.Cleanup(func() {
		server.Stop()
		<-served
	})
	t.Cleanup(func() {
		if err := mux.Close(); err != nil {
			t.Errorf("close mux %s: %v", cfg.LocalAddr, err)
		}
	})
	return &testNode{mux: mux, server: server, addr: cfg.LocalAddr}
}

// openTransport opens the transport of group on n; t.Cleanup closes it.
func (n *testNode) openTransport(t testing.TB, group string) *GroupTransport {
	t.Helper()
	trans, err := n.mux.Transport(group)
	if err != nil {
		t.Fatalf("open transport %s on %s: %v", group, n.addr, err)
	}
	t.Cleanup(func() { _ = trans.Close() })
	return trans
}
