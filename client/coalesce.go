package client

import (
	"context"
	"sync"
	"time"
)

// A coalescer turns calls bound for the same place (a partition) that
// arrive while earlier ones are on the wire into one request. A request
// costs the client and every node on its way about the same whatever it
// carries, so under load many callers share one, while a lone caller's
// request leaves at once: there is no batching delay.
//
// Each caller still waits for, and learns, its own outcome. A caller whose
// context ends before its item was taken into a request withdraws it:
// nothing was sent. One whose item is on the wire gets an unknown outcome,
// and the request goes on for the others; it is cancelled only when every
// caller it carries has left.
type coalescer[K comparable, T, R any] struct {
	// maxItems and maxBytes bound one request; maxRequests bounds the
	// requests for one key on the wire at once.
	maxItems, maxBytes, maxRequests int
	// send makes one request of calls and sets each call's res or err.
	send func(ctx context.Context, key K, calls []*call[T, R])

	mu     sync.Mutex
	queues map[K]*callQueue[T, R]
}

// callQueue is what waits for one key.
type callQueue[T, R any] struct {
	waiting []*call[T, R]
	running int // requests on the wire (goroutines in run)
}

// call is one caller's item and, once done is closed, its outcome.
type call[T, R any] struct {
	item T
	size int
	ctx  context.Context
	done chan struct{}
	res  R
	err  error
	// flight is the request that carries the call, once taken (guarded
	// by the coalescer's mu).
	flight *flight
}

// flight is one request on the wire and how many of its callers still
// wait for it.
type flight struct {
	cancel  context.CancelFunc
	waiting int
}

func newCoalescer[K comparable, T, R any](maxItems, maxBytes, maxRequests int, send func(ctx context.Context, key K, calls []*call[T, R])) *coalescer[K, T, R] {
	return &coalescer[K, T, R]{maxItems: maxItems, maxBytes: maxBytes, maxRequests: maxRequests, send: send, queues: make(map[K]*callQueue[T, R])}
}

// do sends item (of encoded size size) to key with whatever else is
// waiting for it, and returns its outcome. inFlight is the error of a
// caller whose context ended while its item was on the wire.
func (co *coalescer[K, T, R]) do(ctx context.Context, key K, item T, size int, inFlight func(ctxErr error) error) (R, error) {
	c := &call[T, R]{item: item, size: size, ctx: ctx, done: make(chan struct{})}
	co.mu.Lock()
	q := co.queues[key]
	if q == nil {
		q = &callQueue[T, R]{}
		co.queues[key] = q
	}
	q.waiting = append(q.waiting, c)
	start := q.running < co.maxRequests
	if start {
		q.running++
	}
	co.mu.Unlock()
	if start {
		go co.run(key, q)
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
	}
	var zero R
	co.mu.Lock()
	defer co.mu.Unlock()
	select {
	case <-c.done:
		// Answered meanwhile.
		return c.res, c.err
	default:
	}
	if c.flight == nil {
		for i, w := range q.waiting {
			if w == c {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
		return zero, ctx.Err()
	}
	if c.flight.waiting--; c.flight.waiting == 0 {
		c.flight.cancel()
	}
	return zero, inFlight(ctx.Err())
}

// run sends what waits for key, one request after another, until nothing
// does.
func (co *coalescer[K, T, R]) run(key K, q *callQueue[T, R]) {
	for {
		co.mu.Lock()
		calls := co.take(q)
		if len(calls) == 0 {
			if q.running--; q.running == 0 && len(q.waiting) == 0 && co.queues[key] == q {
				delete(co.queues, key)
			}
			co.mu.Unlock()
			return
		}
		ctx, f := flightContext(calls)
		for _, c := range calls {
			c.flight = f
		}
		co.mu.Unlock()
		co.send(ctx, key, calls)
		f.cancel()
		for _, c := range calls {
			close(c.done)
		}
	}
}

// take removes from q what one request carries: at least one call, then
// more while they fit. Called with co.mu held.
func (co *coalescer[K, T, R]) take(q *callQueue[T, R]) []*call[T, R] {
	n, size := 0, 0
	for n < len(q.waiting) && n < co.maxItems {
		if n > 0 && size+q.waiting[n].size > co.maxBytes {
			break
		}
		size += q.waiting[n].size
		n++
	}
	calls := append([]*call[T, R](nil), q.waiting[:n]...)
	q.waiting = append(q.waiting[:0], q.waiting[n:]...)
	return calls
}

// flightContext is the context of a request carrying calls: it keeps the
// first caller's values, ends at the latest of the callers' deadlines (no
// deadline if one of them has none), and is cancelled when every caller
// has left.
func flightContext[T, R any](calls []*call[T, R]) (context.Context, *flight) {
	ctx := context.WithoutCancel(calls[0].ctx)
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	var cancel context.CancelFunc
	if latest.IsZero() {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithDeadline(ctx, latest)
	}
	return ctx, &flight{cancel: cancel, waiting: len(calls)}
}
