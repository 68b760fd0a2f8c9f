package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
)

// fakeWire records the requests a coalescer makes and holds each until
// released.
type fakeWire struct {
	mu       sync.Mutex
	requests [][]int
	ctxs     []context.Context
	started  chan struct{}
	release  chan struct{}
}

func newFakeWire() *fakeWire {
	return &fakeWire{started: make(chan struct{}, 100), release: make(chan struct{}, 100)}
}

// send answers each call with twice its item.
func (w *fakeWire) send(ctx context.Context, key string, calls []*call[int, int]) {
	items := make([]int, len(calls))
	for i, c := range calls {
		items[i] = c.item
	}
	w.mu.Lock()
	w.requests = append(w.requests, items)
	w.ctxs = append(w.ctxs, ctx)
	w.mu.Unlock()
	w.started <- struct{}{}
	<-w.release
	for _, c := range calls {
		c.res = 2 * c.item
	}
}

func (w *fakeWire) sent() [][]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]int(nil), w.requests...)
}

func waiting(co *coalescer[string, int, int], key string) int {
	co.mu.Lock()
	defer co.mu.Unlock()
	if q := co.queues[key]; q != nil {
		return len(q.waiting)
	}
	return 0
}

var errInFlight = errors.New("left while in flight")

func leftInFlight(error) error { return errInFlight }

func TestCoalescerGathersCallsThatArriveWhileARequestIsOnTheWire(t *testing.T) {
	w := newFakeWire()
	co := newCoalescer(4, 100, 1, w.send)
	results := make(chan [2]int, 20)
	do := func(item int) {
		res, err := co.do(context.Background(), "p0", item, 10, leftInFlight)
		if err != nil {
			t.Errorf("item %d: %v", item, err)
		}
		results <- [2]int{item, res}
	}
	go do(0)
	<-w.started // the first request leaves at once, alone
	for i := 1; i <= 6; i++ {
		go do(i)
	}
	await.Until(t, 10*time.Second, "six calls waiting", func() bool { return waiting(co, "p0") == 6 })
	for range 3 {
		w.release <- struct{}{}
	}
	for range 7 {
		r := <-results
		if r[1] != 2*r[0] {
			t.Errorf("item %d got %d, another call's result", r[0], r[1])
		}
	}
	reqs := w.sent()
	if len(reqs) != 3 || len(reqs[0]) != 1 || len(reqs[1]) != 4 || len(reqs[2]) != 2 {
		t.Fatalf("requests %v, want one of 1, then 4 (the most one carries), then 2", reqs)
	}
	await.Until(t, 10*time.Second, "no queue left after the last request", func() bool {
		co.mu.Lock()
		defer co.mu.Unlock()
		return len(co.queues) == 0
	})
}

func TestCoalescerBoundsRequestBytesButSendsAnOversizedCallAlone(t *testing.T) {
	w := newFakeWire()
	co := newCoalescer(100, 25, 1, w.send)
	go co.do(context.Background(), "p0", 0, 10, leftInFlight)
	<-w.started
	done := make(chan struct{})
	for i, size := range []int{10, 10, 10, 40} {
		go func() {
			co.do(context.Background(), "p0", i+1, size, leftInFlight)
			done <- struct{}{}
		}()
		await.Until(t, 10*time.Second, "the call waiting", func() bool { return waiting(co, "p0") == i+1 })
	}
	for range 4 {
		w.release <- struct{}{}
	}
	for range 4 {
		<-done
	}
	reqs := w.sent()
	if len(reqs) != 4 || len(reqs[1]) != 2 || len(reqs[2]) != 1 || len(reqs[3]) != 1 || reqs[3][0] != 4 {
		t.Fatalf("requests %v, want [0] [1 2] [3] [4]", reqs)
	}
}

func TestCoalescerCallLeavingBeforeItIsSentIsNeverSent(t *testing.T) {
	w := newFakeWire()
	co := newCoalescer(10, 100, 1, w.send)
	go co.do(context.Background(), "p0", 0, 1, leftInFlight)
	<-w.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := co.do(ctx, "p0", 1, 1, leftInFlight); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the context's error: the call was never sent", err)
	}
	w.release <- struct{}{}
	await.Until(t, 10*time.Second, "the queue gone", func() bool {
		co.mu.Lock()
		defer co.mu.Unlock()
		return len(co.queues) == 0
	})
	if reqs := w.sent(); len(reqs) != 1 {
		t.Fatalf("requests %v: the withdrawn call was sent", reqs)
	}
}

func TestCoalescerCallLeavingInFlightLearnsTheOutcomeIsUnknown(t *testing.T) {
	w := newFakeWire()
	co := newCoalescer(10, 100, 1, w.send)
	go co.do(context.Background(), "p0", 0, 1, leftInFlight)
	<-w.started
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { _, err := co.do(ctxA, "p0", 1, 1, leftInFlight); errA <- err }()
	await.Until(t, 10*time.Second, "A waiting", func() bool { return waiting(co, "p0") == 1 })
	go func() { _, err := co.do(ctxB, "p0", 2, 1, leftInFlight); errB <- err }()
	await.Until(t, 10*time.Second, "B waiting", func() bool { return waiting(co, "p0") == 2 })
	w.release <- struct{}{}
	<-w.started // A and B on the wire together
	w.mu.Lock()
	flightCtx := w.ctxs[1]
	w.mu.Unlock()

	cancelA()
	if err := <-errA; !errors.Is(err, errInFlight) {
		t.Fatalf("A got %v, want the in-flight error", err)
	}
	if flightCtx.Err() != nil {
		t.Fatal("the request was cancelled while B still waits for it")
	}
	cancelB()
	if err := <-errB; !errors.Is(err, errInFlight) {
		t.Fatalf("B got %v, want the in-flight error", err)
	}
	if flightCtx.Err() == nil {
		t.Fatal("the request goes on after every caller left")
	}
	w.release <- struct{}{}
}

func TestFlightContextEndsAtTheLatestDeadline(t *testing.T) {
	early, cancel1 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel1()
	late, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	ctx, f := flightContext([]*call[int, int]{{ctx: early}, {ctx: late}})
	defer f.cancel()
	if d, _ := ctx.Deadline(); !d.Equal(func() time.Time { d, _ := late.Deadline(); return d }()) {
		t.Fatalf("deadline %v, want the later caller's", d)
	}
	ctx, f = flightContext([]*call[int, int]{{ctx: early}, {ctx: context.Background()}})
	defer f.cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a request carrying a caller without a deadline has one")
	}
}
