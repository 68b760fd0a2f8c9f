package client

import (
	"context"
	"errors"
	"sync/atomic"
)

// lifecycle is what Processor and SessionProcessor share: Run at most
// once; stop taking work on Close or when Run's ctx ends; let running
// handlers finish until Close's ctx ends, then cancel theirs; tell the
// error handler of failures.
type lifecycle struct {
	// stopCtx ends when the processor stops taking work.
	stopCtx context.Context
	stop    context.CancelFunc
	// handlerCtx is the handlers' context: it ends when Close gives up
	// waiting for them.
	handlerCtx    context.Context
	cancelHandler context.CancelFunc
	done          chan struct{}
	running       atomic.Bool
	onError       func(error)
}

func newLifecycle(onError func(error)) *lifecycle {
	l := &lifecycle{done: make(chan struct{}), onError: onError}
	l.stopCtx, l.stop = context.WithCancel(context.Background())
	l.handlerCtx, l.cancelHandler = context.WithCancel(context.Background())
	return l
}

// begin marks the processor running until end is called, which Run does
// once every handler has returned; ctx ending stops it as Close does.
func (l *lifecycle) begin(ctx context.Context) (end func(), err error) {
	if !l.running.CompareAndSwap(false, true) {
		return nil, &Error{Code: CodeInvalidArgument, Message: "the processor is already running"}
	}
	stopAfter := context.AfterFunc(ctx, l.stop)
	return func() {
		stopAfter()
		close(l.done)
	}, nil
}

func (l *lifecycle) report(err error) {
	if l.onError != nil && !errors.Is(err, context.Canceled) {
		l.onError(err)
	}
}

// close stops taking work and waits for Run to end, until ctx ends; then
// it cancels the handlers' context and waits for them to return.
func (l *lifecycle) close(ctx context.Context) error {
	l.stop()
	if !l.running.Load() {
		return nil
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		l.cancelHandler()
		<-l.done
		return ctx.Err()
	}
}
