package azsdk

import (
	"context"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/client"
)

// BenchmarkAMQPAndGRPC puts the Azure SDK over AMQP next to raftbus's own
// SDK over gRPC, against the same node: sends, and receive+complete, one
// at a time and from 16 goroutines.
//
//	cd test/azsdk && go test -run XXX -bench .
func BenchmarkAMQPAndGRPC(b *testing.B) {
	br := startBroker(b)
	ctx := context.Background()
	own, err := client.New(br.cluster.Addrs(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer own.Close()
	body := make([]byte, 1024)

	for _, parallel := range []bool{false, true} {
		mode := "serial"
		if parallel {
			mode = "parallel16"
		}
		run := func(b *testing.B, op func() error) {
			b.ReportAllocs()
			if !parallel {
				for i := 0; i < b.N; i++ {
					if err := op(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		q := br.queue(b, "bench-"+mode)
		azs := br.sender(b, q)
		gs, err := own.NewSender(q, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("AMQP/Send/%s", mode), func(b *testing.B) {
			run(b, func() error { return azs.SendMessage(ctx, &azservicebus.Message{Body: body}, nil) })
		})
		// go-amqp, on which the SDK is built, on its own: what the
		// listener takes without the SDK's work around each send.
		b.Run(fmt.Sprintf("AMQP-go-amqp/Send/%s", mode), func(b *testing.B) {
			conn, err := amqp.Dial(ctx, "amqp://"+br.cluster.Nodes[0].AMQPAddr, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			sess, err := conn.NewSession(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			snd, err := sess.NewSender(ctx, q, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			run(b, func() error { return snd.Send(ctx, amqp.NewMessage(body), nil) })
		})
		b.Run(fmt.Sprintf("gRPC/Send/%s", mode), func(b *testing.B) {
			run(b, func() error { return gs.SendMessage(ctx, &client.Message{Body: body}, nil) })
		})
		// Messages for b.N receives, sent beforehand and not timed.
		fill := func(b *testing.B, n int) {
			msgs := make([]*client.Message, n)
			for i := range msgs {
				msgs[i] = &client.Message{Body: body}
			}
			if err := gs.SendMessages(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		receiveComplete := func(r *azservicebus.Receiver) error {
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil {
				return err
			}
			return r.CompleteMessage(ctx, msgs[0], nil)
		}
		b.Run(fmt.Sprintf("AMQP/ReceiveComplete/%s", mode), func(b *testing.B) {
			// A receiver per goroutine (an SDK receiver takes one
			// ReceiveMessages call at a time), its links attached before
			// the clock starts: the SDK attaches on first use.
			n := 1
			if parallel {
				n = 16
			}
			fill(b, b.N+n)
			receivers := make(chan *azservicebus.Receiver, n)
			for i := 0; i < n; i++ {
				r := br.receiver(b, q, nil)
				if err := receiveComplete(r); err != nil {
					b.Fatal(err)
				}
				receivers <- r
			}
			b.ResetTimer()
			run(b, func() error {
				r := <-receivers
				defer func() { receivers <- r }()
				return receiveComplete(r)
			})
		})
		b.Run(fmt.Sprintf("gRPC/ReceiveComplete/%s", mode), func(b *testing.B) {
			fill(b, b.N)
			b.ResetTimer()
			gr, err := own.NewReceiverForQueue(q, nil)
			if err != nil {
				b.Fatal(err)
			}
			run(b, func() error {
				msgs, err := gr.ReceiveMessages(ctx, 1, nil)
				if err != nil {
					return err
				}
				return gr.CompleteMessage(ctx, msgs[0], nil)
			})
		})
	}
}
