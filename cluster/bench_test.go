package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// BenchmarkSendThroughLeader sends 1 KiB messages with 256 in flight to
// the leader of a one-partition queue on three in-process nodes (real
// disks, fsync on, gRPC on loopback), the path a routing client takes.
func BenchmarkSendThroughLeader(b *testing.B) {
	c := newTestCluster(b, 3)
	createQueue(b, c.client(0), &raftbusv1.QueueProperties{Name: "bench", PartitionCount: proto.Uint32(1)})
	lead := c.leaderOf("bench", 0)
	cl := c.client(lead)
	body := make([]byte, 1024)
	const inflight = 256
	b.ResetTimer()
	var wg sync.WaitGroup
	next := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		next <- struct{}{}
	}
	close(next)
	start := time.Now()
	for i := 0; i < inflight; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				_, err := cl.msg.Send(context.Background(), &raftbusv1.SendRequest{EntityPath: "bench", Messages: []*raftbusv1.Message{{Body: body}}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
