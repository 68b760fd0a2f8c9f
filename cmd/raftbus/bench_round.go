package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/internal/benchmeter"
)

// round is one pass of the workload (the warm-up, or the measured run):
// its producers and consumers, which it starts and stops, and what they
// counted. Its messages' ids start with its prefix, so that a warm-up
// message delivered again during the run is not counted as the run's.
type round struct {
	c        *client.Client
	cfg      benchConfig
	prefix   string
	progress io.Writer

	sent, received, redelivered atomic.Int64
	// maxBacklog is the most messages sent and not yet received at any
	// moment, as seen by a producer after each acknowledged send.
	maxBacklog         atomic.Int64
	sendErrs, recvErrs errorTally
	sendLat, e2eLat    benchmeter.Latencies
	// seen tells first deliveries from redeliveries (and from copies of
	// a send the SDK repeated after an unknown outcome).
	seenMu sync.Mutex
	seen   map[string]struct{}

	// recvStart is when the consumers started; lastReceive is when the
	// last batch was settled, as time since recvStart.
	recvStart     time.Time
	lastReceive   atomic.Int64
	stopConsumers context.CancelFunc
	consumers     sync.WaitGroup
	recvErr       error
	recvErrOnce   sync.Once
	recvFailed    chan struct{} // closed once recvErr is set
}

func newRound(c *client.Client, cfg benchConfig, prefix string, progress io.Writer) *round {
	return &round{c: c, cfg: cfg, prefix: prefix, progress: progress,
		seen: make(map[string]struct{}), recvFailed: make(chan struct{}), stopConsumers: func() {}}
}

// startConsumers starts the consumers; they receive (and complete, in
// peek-lock mode) until stop.
func (r *round) startConsumers(ctx context.Context) {
	cctx, cancel := context.WithCancel(ctx)
	r.stopConsumers = cancel
	r.recvStart = time.Now()
	for i := 0; i < r.cfg.consumers; i++ {
		r.consumers.Add(1)
		go func() {
			defer r.consumers.Done()
			err := consume(cctx, r.c, r.cfg, r.recvErrs.add, r.got)
			if err != nil && cctx.Err() == nil {
				r.recvErrOnce.Do(func() {
					r.recvErr = err
					close(r.recvFailed)
					cancel()
				})
			}
		}()
	}
}

// got counts a settled batch, received at receivedAt: end-to-end ends
// at receipt, not once the batch is settled.
func (r *round) got(msgs []*client.ReceivedMessage, receivedAt time.Time) {
	now := time.Now()
	fresh := 0
	r.seenMu.Lock()
	for _, m := range msgs {
		if !strings.HasPrefix(m.MessageID, r.prefix) {
			continue // another round's, delivered again
		}
		if _, dup := r.seen[m.MessageID]; !dup {
			r.seen[m.MessageID] = struct{}{}
			fresh++
			r.e2eLat.Add(receivedAt.Sub(m.EnqueuedTime))
		}
	}
	r.seenMu.Unlock()
	r.received.Add(int64(fresh))
	r.redelivered.Add(int64(len(msgs) - fresh))
	r.lastReceive.Store(int64(now.Sub(r.recvStart)))
}

// stop stops the consumers and waits for them; it returns the error that
// ended one, if any.
func (r *round) stop() error {
	r.stopConsumers()
	r.consumers.Wait()
	return r.recvErr
}

// produce sends count messages (or, with count 0, for duration) from
// cfg.inflight send loops spread over cfg.producers Senders, and closes
// the returned channel when every send has an outcome.
func (r *round) produce(ctx context.Context, count int64, duration time.Duration) (<-chan struct{}, error) {
	senders := make([]*client.Sender, r.cfg.producers)
	for i := range senders {
		s, err := r.c.NewSender(r.cfg.queue, nil)
		if err != nil {
			return nil, err
		}
		senders[i] = s
	}
	body := make([]byte, r.cfg.size)
	var pctx context.Context
	var stopProducers context.CancelFunc
	if count > 0 {
		pctx, stopProducers = context.WithCancel(ctx)
	} else {
		pctx, stopProducers = context.WithTimeout(ctx, duration)
	}
	// pace hands out one send a tick at --rate; a tick no producer is
	// ready for is dropped, so the rate is a ceiling.
	var pace <-chan time.Time
	stopPace := func() {}
	if r.cfg.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(r.cfg.rate))
		pace, stopPace = t.C, t.Stop
	}
	var next atomic.Int64
	var producers sync.WaitGroup
	for i := 0; i < r.cfg.inflight; i++ {
		producers.Add(1)
		sender := senders[i%len(senders)]
		go func() {
			defer producers.Done()
			for pctx.Err() == nil {
				if pace != nil {
					select {
					case <-pace:
					case <-pctx.Done():
						return
					}
				}
				n := next.Add(1)
				if count > 0 && n > count {
					return
				}
				m := &client.Message{MessageID: r.prefix + strconv.FormatInt(n, 10), Body: body}
				if r.cfg.sessions > 0 {
					m.SessionID = "s" + strconv.FormatInt(n%int64(r.cfg.sessions), 10)
				}
				t0 := time.Now()
				// The end of the run stops issuing sends (pctx) and lets
				// those in flight finish (ctx), so that every send is
				// either counted or an error.
				if err := sender.SendMessage(ctx, m, nil); err != nil {
					r.sendErrs.add(err)
					continue
				}
				r.sendLat.Add(time.Since(t0))
				backlog := r.sent.Add(1) - r.received.Load()
				for {
					top := r.maxBacklog.Load()
					if backlog <= top || r.maxBacklog.CompareAndSwap(top, backlog) {
						break
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		producers.Wait()
		stopProducers()
		stopPace()
		close(done)
	}()
	return done, nil
}

// wait reports progress once a second until the sends are done and, with
// drain, every message sent is received (or a consumer failed). It
// returns how long after start the sends were done.
func (r *round) wait(ctx context.Context, phase string, start time.Time, sendDone <-chan struct{}, drain bool) (time.Duration, error) {
	// One line rewritten on a terminal, a line a second otherwise.
	eol := "\n"
	if f, ok := r.progress.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			eol = "\r"
		}
	}
	defer func() {
		if eol == "\r" {
			fmt.Fprintln(r.progress)
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var sendElapsed time.Duration
	sending, consumerFailed, failed := true, false, r.recvFailed
	for {
		select {
		case <-sendDone:
			sending, sendElapsed, sendDone = false, time.Since(start), nil
		case <-failed:
			consumerFailed, failed = true, nil
		case <-tick.C:
			el := time.Since(start).Seconds()
			sent := fmt.Sprintf("sent %9d (%7.0f/s)", r.sent.Load(), float64(r.sent.Load())/el)
			if phase == "drain" {
				sent = fmt.Sprintf("of   %9d          ", r.sent.Load())
			}
			fmt.Fprintf(r.progress, "%-7s %5.0fs  %s  received %9d (%7.0f/s)  errors %d %s", phase, el,
				sent, r.received.Load(), float64(r.received.Load())/el, r.sendErrs.total()+r.recvErrs.total(), eol)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if !sending && (!drain || consumerFailed || r.received.Load() >= r.sent.Load()) {
			return sendElapsed, nil
		}
	}
}

// consume receives (and completes, in peek-lock mode) until ctx ends,
// calling got for each batch once it is settled. A failure a retry can
// get past goes to failed and the consumer goes on; another ends it.
func consume(ctx context.Context, c *client.Client, cfg benchConfig, failed func(error), got func([]*client.ReceivedMessage, time.Time)) error {
	mode := client.ReceiveModePeekLock
	if cfg.mode == "receive-and-delete" {
		mode = client.ReceiveModeReceiveAndDelete
	}
	opts := &client.ReceiveMessagesOptions{MaxWaitTime: time.Second}
	completers := startCompleters(cfg.batch)
	defer completers.stop()
	drain := func(r *client.Receiver) (int, error) {
		msgs, err := r.ReceiveMessages(ctx, cfg.batch, opts)
		receivedAt := time.Now()
		if err != nil {
			return 0, retried(ctx, err, failed)
		}
		var settleErr error
		if mode == client.ReceiveModePeekLock {
			settleErr = completers.completeAll(ctx, r, msgs, failed)
		}
		got(msgs, receivedAt)
		return len(msgs), settleErr
	}
	if cfg.sessions == 0 {
		r, err := c.NewReceiverForQueue(cfg.queue, &client.ReceiverOptions{ReceiveMode: mode})
		if err != nil {
			return err
		}
		for ctx.Err() == nil {
			if _, err := drain(r); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	}
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := c.AcceptNextSessionForQueue(actx, cfg.queue, &client.SessionReceiverOptions{ReceiveMode: mode})
		cancel()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			return err
		}
		for ctx.Err() == nil {
			n, err := drain(s.Receiver)
			if err != nil || n == 0 {
				break
			}
		}
		s.Close(context.Background())
	}
	return nil
}

// completers complete messages on long-lived goroutines, one for each
// message a receive can return, so that a batch's completes all run at
// once without a goroutine started (and its stack grown through the
// SDK's call path) for each message.
type completers struct {
	jobs chan completeJob
}

type completeJob struct {
	ctx  context.Context
	r    *client.Receiver
	m    *client.ReceivedMessage
	errs chan<- error
}

func startCompleters(n int) *completers {
	c := &completers{jobs: make(chan completeJob)}
	for range n {
		go func() {
			for j := range c.jobs {
				j.errs <- j.r.CompleteMessage(j.ctx, j.m, nil)
			}
		}()
	}
	return c
}

func (c *completers) stop() { close(c.jobs) }

// completeAll completes a batch concurrently, each message by its own
// call: settlement is one round trip each, and the SDK and the partition
// gather concurrent completes into shared requests and log entries.
func (c *completers) completeAll(ctx context.Context, r *client.Receiver, msgs []*client.ReceivedMessage, failed func(error)) error {
	errs := make(chan error, len(msgs))
	for _, m := range msgs {
		c.jobs <- completeJob{ctx: ctx, r: r, m: m, errs: errs}
	}
	var first error
	for range msgs {
		// A lost lock (its leader changed while the lock was held, or a
		// settlement repeated after an unknown outcome) means the message
		// may come again; the run counts that as a redelivery.
		err := <-errs
		if err == nil || errors.Is(err, client.ErrLockLost) {
			continue
		}
		if err := retried(ctx, err, failed); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// retried passes err to failed and returns nil when a retry can get past
// it (or the run is over); otherwise it returns err.
func retried(ctx context.Context, err error, failed func(error)) error {
	if ctx.Err() != nil {
		return nil
	}
	var e *client.Error
	if errors.As(err, &e) && e.Retryable {
		failed(err)
		return nil
	}
	return err
}
