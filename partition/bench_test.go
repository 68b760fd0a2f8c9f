package partition_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// benchCluster is three replicas on real disk (fsync on) with the default
// timing, as a node runs them.
func benchCluster(b *testing.B) *partition.Partition {
	c := newTestCluster(b, 3, func(cfg *partition.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 0, 0, 0
	})
	p := c.replicas[c.leader()]
	configure(b, p, &raftbusv1.QueueProperties{MaxSizeInMegabytes: ptr(int64(1 << 20))})
	return p
}

func ptr[T any](v T) *T { return &v }

// runInFlight runs op n times with at most inflight calls at once.
func runInFlight(b *testing.B, n, inflight int, op func(i int) error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := op(i); err != nil {
					b.Error(err) // keep draining so the feeder never blocks
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

var body1K = make([]byte, 1024)

func BenchmarkSend256InFlight(b *testing.B) {
	p := benchCluster(b)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	runInFlight(b, b.N, 256, func(int) error {
		_, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: body1K}))
		return err
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
}

func BenchmarkSendLockComplete256InFlight(b *testing.B) {
	p := benchCluster(b)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	runInFlight(b, b.N, 256, func(int) error {
		if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: body1K})); err != nil {
			return err
		}
		msgs, err := p.Receive(ctx, lockCmd(1), time.Second)
		if err != nil || len(msgs) == 0 {
			return err
		}
		_, err = p.Apply(ctx, completeCmd(msgs[0].LockToken))
		return err
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkSendLatency1InFlight(b *testing.B) {
	p := benchCluster(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: body1K})); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
