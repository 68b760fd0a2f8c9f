package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/test/procs"
)

// BenchmarkSendMessages measures pipelined single-message sends of 128
// bytes through the SDK to a 3-node cluster (fsync on), MaxInFlight at a
// time.
func BenchmarkSendMessages(b *testing.B) {
	for _, inFlight := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			cl := procs.Start(b, raftbusd, 3)
			var addrs []string
			for _, n := range cl.Nodes {
				addrs = append(addrs, n.Addr)
			}
			c, err := client.New(addrs, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ad := adminOf(c)
			if _, err := ad.CreateQueue(ctx, "bench", nil); err != nil {
				b.Fatal(err)
			}
			s, _ := c.NewSender("bench", &client.NewSenderOptions{MaxInFlight: inFlight})
			body := make([]byte, 128)
			b.ResetTimer()
			start := time.Now()
			for sent := 0; sent < b.N; {
				k := min(1024, b.N-sent)
				msgs := make([]*client.Message, k)
				for i := range msgs {
					msgs[i] = &client.Message{Body: body}
				}
				if err := s.SendMessages(ctx, msgs); err != nil {
					b.Fatal(err)
				}
				sent += k
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
