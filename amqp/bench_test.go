package amqp

import (
	"context"
	"testing"

	goamqp "github.com/Azure/go-amqp"
)

// acceptAll takes every message at once: the engine's own cost.
type acceptAll struct{}

func (acceptAll) Connect(*Conn) ConnHandler { return acceptAll{} }
func (acceptAll) Closed()                   {}
func (acceptAll) Attach(l *Link) error {
	l.OnMessage = func(*Delivery) DeliveryState { return nil }
	return nil
}

// BenchmarkSend measures sends of 1 KiB that the peer waits to see
// settled, from 16 goroutines over one link.
func BenchmarkSend(b *testing.B) {
	addr := startServer(b, acceptAll{})
	ctx := context.Background()
	conn, err := goamqp.Dial(ctx, "amqp://"+addr, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := snd.Send(ctx, goamqp.NewMessage(body), nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
