package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
)

// TestReceiveStream runs the receives of Receivers and Processors, which
// go on receive streams, on a three-node cluster.
func TestReceiveStream(t *testing.T) {
	e := startEnv(t, 3)
	t.Run("ProcessorPrefetchIsLockedWhileHandlersWork", e.testProcessorPrefetchIsLockedWhileHandlersWork)
	t.Run("ProcessorReceivesEverythingOnce", e.testProcessorReceivesEverythingOnce)
	t.Run("ReceiveGivenUpStrandsNothing", e.testReceiveGivenUpStrandsNothing)
	t.Run("ConcurrentReceivesShareTheStream", e.testConcurrentReceivesShareTheStream)
}

// sendIDs sends one message per id.
func (e *env) sendIDs(t *testing.T, ctx context.Context, path string, ids ...string) {
	t.Helper()
	s := e.sender(path)
	for _, id := range ids {
		if err := s.SendMessage(ctx, &client.Message{MessageID: id, PartitionKey: id, Body: []byte(id)}, nil); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
}

func numbered(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ids
}

// A Processor with one handler and a prefetch of 5 has six messages
// locked while its handler works on the first: the credit of the free
// handler and the prefetch, granted on the stream. Then it handles them
// all, each once.
func (e *env) testProcessorPrefetchIsLockedWhileHandlersWork(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("prefetched", &admin.QueueProperties{PartitionCount: proto.Uint32(3)})
	const n = 40
	e.sendIDs(t, ctx, "prefetched", numbered("p", n)...)
	var (
		mu      sync.Mutex
		seen    = map[string]int{}
		blocked = make(chan struct{})
		all     = make(chan struct{})
	)
	first := true
	p, err := e.c.NewProcessorForQueue("prefetched", func(ctx context.Context, ev *client.ProcessMessageEvent) error {
		mu.Lock()
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-blocked
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[ev.Message.MessageID]++; len(seen) == n {
			close(all)
		}
		return nil
	}, &client.ProcessorOptions{MaxConcurrentCalls: 1, PrefetchCount: 5, ErrorHandler: func(err error) { t.Errorf("processor: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	locked := func() int64 {
		rt, err := e.admin.GetQueueRuntimeProperties(ctx, "prefetched")
		if err != nil {
			t.Fatal(err)
		}
		return rt.GetLockedMessageCount()
	}
	await.Until(t, 20*time.Second, "six messages locked: one handled, five prefetched", func() bool { return locked() == 6 })
	close(blocked)
	e.handledOnce(t, ctx, "prefetched", p, ran, all, &mu, seen, n)
}

// handledOnce waits until all is closed (every one of n messages seen),
// closes p, and checks that each message was handled once and that queue
// is left empty.
func (e *env) handledOnce(t *testing.T, ctx context.Context, queue string, p *client.Processor, ran <-chan error,
	all <-chan struct{}, mu *sync.Mutex, seen map[string]int, n int) {
	t.Helper()
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("handled %d of %d messages", len(seen), n)
	}
	closeProcessor(t, ctx, p, ran)
	mu.Lock()
	defer mu.Unlock()
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s handled %d times", id, k)
		}
	}
	if rt, err := e.admin.GetQueueRuntimeProperties(ctx, queue); err != nil || rt.GetTotalMessageCount() != 0 {
		t.Fatalf("after processing: %v, %v; want an empty queue", rt, err)
	}
}

func closeProcessor(t *testing.T, ctx context.Context, p *client.Processor, ran <-chan error) {
	t.Helper()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
}

// Processors in both modes, with handlers and prefetch across a
// partitioned queue, receive every message exactly once while messages
// keep arriving.
func (e *env) testProcessorReceivesEverythingOnce(t *testing.T) {
	for _, mode := range []client.ReceiveMode{client.ReceiveModePeekLock, client.ReceiveModeReceiveAndDelete} {
		t.Run(fmt.Sprint("mode ", mode), func(t *testing.T) {
			ctx := ctxT(t, 90*time.Second)
			queue := fmt.Sprintf("once-%d", mode)
			e.createQueue(queue, &admin.QueueProperties{PartitionCount: proto.Uint32(4)})
			const n = 300
			var (
				mu   sync.Mutex
				seen = map[string]int{}
				all  = make(chan struct{})
			)
			p, err := e.c.NewProcessorForQueue(queue, func(ctx context.Context, ev *client.ProcessMessageEvent) error {
				mu.Lock()
				defer mu.Unlock()
				if seen[ev.Message.MessageID]++; len(seen) == n && seen[ev.Message.MessageID] == 1 {
					close(all)
				}
				return nil
			}, &client.ProcessorOptions{ReceiveMode: mode, MaxConcurrentCalls: 4, PrefetchCount: 16, ErrorHandler: func(err error) { t.Errorf("processor: %v", err) }})
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- p.Run(context.Background()) }()
			e.sendIDs(t, ctx, queue, numbered("o", n)...)
			e.handledOnce(t, ctx, queue, p, ran, all, &mu, seen, n)
		})
	}
}

// A receive whose caller gives up while it waits on the stream breaks the
// stream: what it received, if anything, is handed out by the next
// receive, which opens a new stream; nothing stays locked unseen.
func (e *env) testReceiveGivenUpStrandsNothing(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	e.createQueue("given-up", &admin.QueueProperties{LockDuration: durationpb.New(time.Minute)})
	r := e.receiver("given-up", nil)
	// A first receive opens the stream.
	if got, err := r.ReceiveMessages(ctx, 1, &client.ReceiveMessagesOptions{MaxWaitTime: 10 * time.Millisecond}); err != nil || len(got) != 0 {
		t.Fatalf("a receive of an empty queue: %v, %v", got, err)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	// The receive is granted, then given up at once, waiting.
	if got, err := r.ReceiveMessages(gaveUp, 1, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a receive given up: %v, %v; want the context's error", got, err)
	}
	e.sendIDs(t, ctx, "given-up", "late")
	got, err := r.ReceiveMessages(ctx, 5, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "late" || got[0].DeliveryCount != 1 {
		t.Fatalf("the receive after one given up: %v, %v; want late, delivered once", got, err)
	}
	if rt, err := e.admin.GetQueueRuntimeProperties(ctx, "given-up"); err != nil || rt.GetLockedMessageCount() != 1 {
		t.Fatalf("runtime: %v, %v; want the one message locked", rt, err)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
}

// Receives made at once by several goroutines share the Receiver's
// stream, each answered with its own messages.
func (e *env) testConcurrentReceivesShareTheStream(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	e.createQueue("shared", nil)
	r := e.receiver("shared", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	const receivers, n = 8, 200
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done {
					return
				}
				got, err := r.ReceiveMessages(ctx, 7, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
				if err != nil {
					t.Errorf("receive: %v", err)
					return
				}
				mu.Lock()
				for _, m := range got {
					seen[m.MessageID]++
				}
				mu.Unlock()
			}
		}()
	}
	e.sendIDs(t, ctx, "shared", numbered("s", n)...)
	wg.Wait()
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s received %d times", id, k)
		}
	}
	if len(seen) != n {
		t.Fatalf("received %d of %d", len(seen), n)
	}
}
