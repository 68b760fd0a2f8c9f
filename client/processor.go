package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ProcessorOptions configure a Processor.
type ProcessorOptions struct {
	// ReceiveMode and SubQueue as for a Receiver.
	ReceiveMode ReceiveMode
	SubQueue    SubQueue
	// MaxConcurrentCalls is how many handler calls run at once. Default 1.
	MaxConcurrentCalls int
	// PrefetchCount is how many messages are received ahead of free
	// handlers. Default 0. Prefetched messages are locked while they wait
	// and their locks are not renewed until a handler takes them: keep it
	// small against the entity's LockDuration.
	PrefetchCount int
	// MaxAutoLockRenewalDuration is how long after receipt the processor
	// keeps renewing a message's lock while its handler runs. Default 5
	// minutes; negative: no renewal.
	MaxAutoLockRenewalDuration time.Duration
	// DisableAutoComplete leaves settlement to the handler. Otherwise a
	// message the handler did not settle is completed when the handler
	// returns nil and abandoned when it returns an error.
	DisableAutoComplete bool
	// ErrorHandler, when set, is told of failures to receive, settle or
	// renew (the processor carries on).
	ErrorHandler func(error)
}

// MessageHandler processes one message. ctx ends when the processor is
// closed and its grace period is over.
type MessageHandler func(ctx context.Context, event *ProcessMessageEvent) error

// ProcessMessageEvent is a message handed to a MessageHandler, with the
// means to settle it explicitly.
type ProcessMessageEvent struct {
	Message *ReceivedMessage
	r       *Receiver
	settled atomic.Bool
}

// CompleteMessage completes the message.
func (e *ProcessMessageEvent) CompleteMessage(ctx context.Context, options *CompleteMessageOptions) error {
	e.settled.Store(true)
	return e.r.CompleteMessage(ctx, e.Message, options)
}

// AbandonMessage abandons the message.
func (e *ProcessMessageEvent) AbandonMessage(ctx context.Context, options *AbandonMessageOptions) error {
	e.settled.Store(true)
	return e.r.AbandonMessage(ctx, e.Message, options)
}

// DeadLetterMessage dead-letters the message.
func (e *ProcessMessageEvent) DeadLetterMessage(ctx context.Context, options *DeadLetterOptions) error {
	e.settled.Store(true)
	return e.r.DeadLetterMessage(ctx, e.Message, options)
}

// DeferMessage defers the message.
func (e *ProcessMessageEvent) DeferMessage(ctx context.Context, options *DeferMessageOptions) error {
	e.settled.Store(true)
	return e.r.DeferMessage(ctx, e.Message, options)
}

// Processor receives messages continuously and hands each to a handler,
// like the ServiceBusProcessor of the .NET SDK: up to MaxConcurrentCalls at
// once, locks renewed while handlers run, settled by the handler's result.
type Processor struct {
	r       *Receiver
	handler MessageHandler
	opts    ProcessorOptions

	*lifecycle
}

// NewProcessorForQueue returns a Processor for a queue; Run starts it.
func (c *Client) NewProcessorForQueue(queue string, handler MessageHandler, options *ProcessorOptions) (*Processor, error) {
	return c.newProcessor(queue, handler, options)
}

// NewProcessorForSubscription returns a Processor for a subscription.
func (c *Client) NewProcessorForSubscription(topic, subscription string, handler MessageHandler, options *ProcessorOptions) (*Processor, error) {
	return c.newProcessor(subscriptionPath(topic, subscription), handler, options)
}

func (c *Client) newProcessor(path string, handler MessageHandler, options *ProcessorOptions) (*Processor, error) {
	if handler == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "nil message handler"}
	}
	p := &Processor{handler: handler}
	if options != nil {
		p.opts = *options
	}
	p.opts.MaxConcurrentCalls = max(p.opts.MaxConcurrentCalls, 1)
	p.opts.PrefetchCount = max(p.opts.PrefetchCount, 0)
	if p.opts.MaxAutoLockRenewalDuration == 0 {
		p.opts.MaxAutoLockRenewalDuration = 5 * time.Minute
	}
	r, err := c.newReceiver(path, &ReceiverOptions{ReceiveMode: p.opts.ReceiveMode, SubQueue: p.opts.SubQueue})
	if err != nil {
		return nil, err
	}
	p.r = r
	p.lifecycle = newLifecycle(p.opts.ErrorHandler)
	return p, nil
}

// Run processes messages until ctx ends or Close is called, then returns
// once every handler call has finished. It returns nil after Close and
// ctx's error when ctx ended.
func (p *Processor) Run(ctx context.Context) error {
	end, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer end()

	work := make(chan *ReceivedMessage, p.opts.PrefetchCount)
	var workers sync.WaitGroup
	for range p.opts.MaxConcurrentCalls {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for m := range work {
				if p.stopCtx.Err() != nil {
					p.release(m)
					continue
				}
				p.process(m)
			}
		}()
	}
	p.receiveLoop(work)
	close(work)
	workers.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// maxOutstandingReceives is how many receives a Processor has on its
// receive stream at once: one the server serves while the next waits
// there, so that the server goes on to the next as soon as it answers
// one. Handlers freed meanwhile are granted together by the next.
const maxOutstandingReceives = 2

// receiveLoop keeps as many messages received as there is room for, free
// handlers plus prefetch: the room is granted as credit on the receive
// stream, in up to maxOutstandingReceives receives at once, so the server
// locks the next messages while handlers work on the last ones. When the
// processor stops, it closes the stream and releases what the
// outstanding receives got.
func (p *Processor) receiveLoop(work chan<- *ReceivedMessage) {
	credit := p.opts.MaxConcurrentCalls + p.opts.PrefetchCount
	// freed gets a token back for each message a handler is done with.
	freed := make(chan struct{}, 2*credit+maxBatchMessages) // room for a replay beyond the credit
	answers := make(chan receiveAnswer, maxOutstandingReceives)
	// The receives outlive a stop by a grace period, to recover what
	// they received once the stream is closed.
	receiveCtx, cancelReceives := context.WithCancel(context.Background())
	defer cancelReceives()
	outstanding := 0
	var resume <-chan time.Time // set while pausing after a failure
	for {
		if credit > 0 && outstanding < maxOutstandingReceives && resume == nil {
			n := min(credit, maxBatchMessages)
			outstanding++
			go p.receive(receiveCtx, n, answers)
			credit -= n
		}
		select {
		case <-freed:
			credit++
		case a := <-answers:
			outstanding--
			credit += a.asked - len(a.msgs)
			if a.err != nil && p.stopCtx.Err() == nil {
				p.report(a.err)
				resume = time.After(time.Second)
			}
			p.dispatch(work, a.msgs, freed)
		case <-resume:
			resume = nil
		case <-p.stopCtx.Done():
			p.r.link.close(true)
			time.AfterFunc(stopGrace, cancelReceives)
			for ; outstanding > 0; outstanding-- {
				for _, m := range (<-answers).msgs {
					p.release(m)
				}
			}
			return
		}
	}
}

// stopGrace bounds how long a stopping processor waits for its
// outstanding receives to recover what they received.
const stopGrace = 10 * time.Second

// receiveAnswer is what one receive of the receive loop got.
type receiveAnswer struct {
	asked int
	msgs  []*ReceivedMessage
	err   error
}

// receive receives up to n messages for the receive loop.
func (p *Processor) receive(ctx context.Context, n int, answers chan<- receiveAnswer) {
	msgs, err := p.r.receiveOnce(ctx, n, 30*time.Second)
	answers <- receiveAnswer{asked: n, msgs: msgs, err: err}
}

// dispatch hands msgs to the handlers; each gives its credit back to
// freed once handled.
func (p *Processor) dispatch(work chan<- *ReceivedMessage, msgs []*ReceivedMessage, freed chan<- struct{}) {
	for _, m := range msgs {
		m.onDone = func() { freed <- struct{}{} }
		select {
		case work <- m:
		case <-p.stopCtx.Done():
			p.release(m)
		}
	}
}

// pause waits a little after a failed receive so that a broken connection
// is not hammered.
func (p *Processor) pause() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stopCtx.Done():
	}
}

func (p *Processor) process(m *ReceivedMessage) {
	defer m.done()
	ev := &ProcessMessageEvent{Message: m, r: p.r}
	peekLock := p.opts.ReceiveMode == ReceiveModePeekLock
	if peekLock && !m.LockedUntil.IsZero() && time.Now().After(m.LockedUntil) {
		// It waited in the prefetch buffer longer than its lock: it is
		// someone else's now.
		p.report(&Error{Code: CodeLockLost, Message: fmt.Sprintf("message %d: lock expired while prefetched; not handled", m.SequenceNumber)})
		return
	}
	renewDone := make(chan struct{})
	var renewer sync.WaitGroup
	if peekLock && p.opts.MaxAutoLockRenewalDuration > 0 {
		renewer.Add(1)
		go func() {
			defer renewer.Done()
			p.renewLock(m, renewDone)
		}()
	}
	err := p.handler(p.handlerCtx, ev)
	close(renewDone)
	renewer.Wait()
	if !peekLock || p.opts.DisableAutoComplete || ev.settled.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var serr error
	if err == nil {
		serr = p.r.CompleteMessage(ctx, m, nil)
	} else {
		p.report(err)
		serr = p.r.AbandonMessage(ctx, m, nil)
	}
	if serr != nil {
		p.report(serr)
	}
}

// renewLock renews m's lock halfway through each lock period until done
// closes or MaxAutoLockRenewalDuration after receipt.
func (p *Processor) renewLock(m *ReceivedMessage, done <-chan struct{}) {
	end := time.Now().Add(p.opts.MaxAutoLockRenewalDuration)
	for {
		wait := time.Until(m.LockedUntil) / 2
		if time.Now().Add(wait).After(end) {
			return
		}
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.r.RenewMessageLock(ctx, m, nil)
		cancel()
		if err != nil {
			p.report(err)
			return
		}
	}
}

// release gives back a message received but not processed because the
// processor is closing.
func (p *Processor) release(m *ReceivedMessage) {
	defer m.done()
	if p.opts.ReceiveMode != ReceiveModePeekLock {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.r.AbandonMessage(ctx, m, nil); err != nil {
		p.report(err)
	}
}

// Close stops receiving and waits for running handlers to finish, until
// ctx ends; then their ctx is cancelled and Close waits for them to return.
// Prefetched messages not yet handed out are abandoned.
func (p *Processor) Close(ctx context.Context) error { return p.close(ctx) }
