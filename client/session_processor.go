package client

import (
	"context"
	"sync"
	"time"
)

// SessionProcessorOptions configure a SessionProcessor.
type SessionProcessorOptions struct {
	ReceiveMode ReceiveMode
	// MaxConcurrentSessions is how many sessions are processed at once,
	// each by one handler call at a time (so in order). Default 8.
	MaxConcurrentSessions int
	// SessionIdleTimeout closes a session after this long without a
	// message, to move on to another. Default 10s.
	SessionIdleTimeout time.Duration
	// MaxAutoLockRenewalDuration bounds how long a message lock is renewed
	// while its handler runs (default 5 minutes, negative: never). The
	// session lock is renewed for as long as the session is held.
	MaxAutoLockRenewalDuration time.Duration
	// DisableAutoComplete, ErrorHandler: as in ProcessorOptions.
	DisableAutoComplete bool
	ErrorHandler        func(error)
}

// SessionMessageHandler processes one message of a held session.
type SessionMessageHandler func(ctx context.Context, event *ProcessSessionMessageEvent) error

// ProcessSessionMessageEvent is a message of a session, with the session's
// receiver for its state.
type ProcessSessionMessageEvent struct {
	ProcessMessageEvent
	Session *SessionReceiver
}

// SessionProcessor accepts sessions one after another and processes each
// session's messages in order.
type SessionProcessor struct {
	c       *Client
	path    string
	handler SessionMessageHandler
	opts    SessionProcessorOptions

	*lifecycle
}

// NewSessionProcessorForQueue returns a SessionProcessor for a session
// queue; Run starts it.
func (c *Client) NewSessionProcessorForQueue(queue string, handler SessionMessageHandler, options *SessionProcessorOptions) (*SessionProcessor, error) {
	return c.newSessionProcessor(queue, handler, options)
}

// NewSessionProcessorForSubscription returns a SessionProcessor for a
// session subscription.
func (c *Client) NewSessionProcessorForSubscription(topic, subscription string, handler SessionMessageHandler, options *SessionProcessorOptions) (*SessionProcessor, error) {
	return c.newSessionProcessor(subscriptionPath(topic, subscription), handler, options)
}

func (c *Client) newSessionProcessor(path string, handler SessionMessageHandler, options *SessionProcessorOptions) (*SessionProcessor, error) {
	if handler == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "nil message handler"}
	}
	p := &SessionProcessor{c: c, path: path, handler: handler}
	if options != nil {
		p.opts = *options
	}
	if p.opts.MaxConcurrentSessions <= 0 {
		p.opts.MaxConcurrentSessions = 8
	}
	if p.opts.SessionIdleTimeout <= 0 {
		p.opts.SessionIdleTimeout = 10 * time.Second
	}
	if p.opts.MaxAutoLockRenewalDuration == 0 {
		p.opts.MaxAutoLockRenewalDuration = 5 * time.Minute
	}
	p.lifecycle = newLifecycle(p.opts.ErrorHandler)
	return p, nil
}

// Run processes sessions until ctx ends or Close is called.
func (p *SessionProcessor) Run(ctx context.Context) error {
	end, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var wg sync.WaitGroup
	for range p.opts.MaxConcurrentSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p.stopCtx.Err() == nil {
				p.serveNextSession()
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (p *SessionProcessor) serveNextSession() {
	s, err := p.c.acceptSession(p.stopCtx, p.path, "", &SessionReceiverOptions{ReceiveMode: p.opts.ReceiveMode})
	if err != nil {
		if p.stopCtx.Err() == nil {
			p.report(err)
			sleepCtx(p.stopCtx, time.Second)
		}
		return
	}
	// The session lock is renewed while the session is held.
	renewCtx, stopRenew := context.WithCancel(context.Background())
	var renewer sync.WaitGroup
	renewer.Add(1)
	go func() {
		defer renewer.Done()
		for {
			if !sleepCtx(renewCtx, time.Until(s.LockedUntil())/2) {
				return
			}
			if err := s.RenewSessionLock(renewCtx, nil); err != nil {
				p.report(err)
				return
			}
		}
	}()
	defer func() {
		stopRenew()
		renewer.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			p.report(err)
		}
	}()
	// Messages are handled one at a time, in session order, through a
	// single-call Processor over the session's receiver.
	inner := &Processor{
		r: s.Receiver,
		opts: ProcessorOptions{
			ReceiveMode: p.opts.ReceiveMode, MaxConcurrentCalls: 1,
			MaxAutoLockRenewalDuration: p.opts.MaxAutoLockRenewalDuration,
			DisableAutoComplete:        p.opts.DisableAutoComplete, ErrorHandler: p.opts.ErrorHandler,
		},
		// The session processor's: its handler context and error handler.
		lifecycle: p.lifecycle,
		handler: func(ctx context.Context, ev *ProcessMessageEvent) error {
			sev := &ProcessSessionMessageEvent{Session: s}
			sev.Message, sev.r = ev.Message, ev.r
			err := p.handler(ctx, sev)
			if sev.settled.Load() {
				ev.settled.Store(true)
			}
			return err
		},
	}
	for p.stopCtx.Err() == nil {
		msgs, err := s.ReceiveMessages(p.stopCtx, 1, &ReceiveMessagesOptions{MaxWaitTime: p.opts.SessionIdleTimeout})
		if err != nil {
			if p.stopCtx.Err() == nil {
				p.report(err)
			}
			return
		}
		if len(msgs) == 0 {
			return // idle: move on to another session
		}
		inner.process(msgs[0])
	}
}

// Close stops accepting sessions and waits for running handlers, as
// Processor.Close.
func (p *SessionProcessor) Close(ctx context.Context) error { return p.close(ctx) }

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(max(d, 10*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
