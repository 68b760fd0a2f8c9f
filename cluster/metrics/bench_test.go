package metrics

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/partition"
)

type noState struct{}

func (noState) EachGroup(func(string, partition.RaftStats)) {}
func (noState) EachLed(func(uint32, partition.EntityStats)) {}
func (noState) Ready() error                                { return nil }

// What the metrics add to one client call (the interceptor: a clock
// reading and a histogram observation) and to one Raft entry (commit,
// apply and fsync observations): compare with the node's CPU per message
// (docs/benchmarks.md).
func BenchmarkInterceptorPerCall(b *testing.B) {
	m := New(noState{})
	intercept := m.UnaryInterceptor(func(context.Context) bool { return false })
	info := &grpc.UnaryServerInfo{FullMethod: "/raftbus.v1.MessagingService/SendEach"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		intercept(ctx, nil, info, handler)
	}
}

func BenchmarkObservationsPerEntry(b *testing.B) {
	m := New(noState{})
	b.ReportAllocs()
	for b.Loop() {
		m.Committed(3 * time.Millisecond)
		m.Applied(1, 50*time.Microsecond)
		m.Synced(2 * time.Millisecond)
	}
}
