package rpcreach_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/internal/rpcreach"
	"github.com/raftbus/raftbus/test/proxy"
)

// countingHealth answers Check and counts the calls it handled.
type countingHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *countingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Add(1)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func serve(t *testing.T) (string, *countingHealth) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &countingHealth{}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String(), h
}

func check(t *testing.T, target string, opts ...grpc.DialOption) (*rpcreach.Conn, error) {
	t.Helper()
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := rpcreach.Wrap(cc)
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return conn, err
}

func TestRefusedConnectionIsNeverSent(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	conn, err := check(t, closed)
	if status.Code(err) != codes.Unavailable || conn.MaybeSent() {
		t.Fatalf("call to a closed port: %v, maybe sent %v; want Unavailable, not sent", err, conn.MaybeSent())
	}
}

func TestConnectionBrokenAfterTheRequestMayHaveBeenSent(t *testing.T) {
	addr, h := serve(t)
	p := proxy.Start(t, addr)
	// Warm the connection up so that the cut hits the call, not the
	// handshake.
	if _, err := check(t, p.Addr); err != nil {
		t.Fatal(err)
	}
	p.DropResponses(1)
	conn, err := check(t, p.Addr)
	if status.Code(err) != codes.Unavailable || !conn.MaybeSent() {
		t.Fatalf("call whose answer was lost: %v, maybe sent %v; want Unavailable, maybe sent", err, conn.MaybeSent())
	}
	if p.Dropped() != 1 || h.calls.Load() != 2 {
		t.Fatalf("%d responses dropped, %d calls handled; want 1 and 2", p.Dropped(), h.calls.Load())
	}
}

func TestSuccessfulCallReportsItsPeer(t *testing.T) {
	addr, _ := serve(t)
	conn, err := check(t, addr)
	if err != nil || !conn.MaybeSent() {
		t.Fatalf("call: %v, maybe sent %v", err, conn.MaybeSent())
	}
}
