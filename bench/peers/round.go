package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/raftbus/raftbus/internal/benchmeter"
)

// round is one pass of the workload (the warm-up, or the measured run)
// on its own subject of the stream, so that a message of another round
// delivered again is not counted as this one's. It owns its connections,
// producers and consumers.
type round struct {
	cfg             config
	stream, subject string
	progress        io.Writer
	label           string
	admin           jetstream.JetStream // for the stream's state
	producers       []jetstream.JetStream
	consumers       []jetstream.JetStream
	conns           []*nats.Conn
	sent, received  atomic.Int64
	redelivered     atomic.Int64
	maxBacklog      atomic.Int64
	sendErrs        errorTally
	recvErrs        errorTally
	sendLat, e2eLat benchmeter.Latencies
	seenMu          sync.Mutex
	seen            map[uint64]struct{} // stream sequences received
	recvStart       time.Time
	lastReceive     atomic.Int64 // since recvStart
	// settled is when the stream was last seen empty after every message
	// sent was received, since recvStart: every ack committed through
	// the consumer's Raft group and applied (work-queue retention
	// removes a message then); unsettled is how many it still held when
	// the wait for that gave up.
	settled       time.Duration
	unsettled     uint64
	consuming     []jetstream.ConsumeContext
	doubleAcks    sync.WaitGroup
	stopConsumers context.CancelFunc
}

// newRound connects every producer and consumer, before anything is
// measured.
func newRound(cfg config, admin jetstream.JetStream, stream, label string, progress io.Writer) (*round, error) {
	r := &round{cfg: cfg, admin: admin, stream: stream, subject: stream + "." + label, label: label, progress: progress,
		seen: make(map[uint64]struct{}), stopConsumers: func() {}}
	for i := range cfg.producers {
		nc, err := nats.Connect(cfg.servers, nats.Name(fmt.Sprintf("producer-%d", i)))
		if err != nil {
			r.close()
			return nil, err
		}
		r.conns = append(r.conns, nc)
		// The library's own bound on publishes awaiting their PubAck is
		// the producer's share of the window; produce keeps to it.
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(r.window(i)),
			jetstream.WithPublishAsyncTimeout(cfg.timeout))
		if err != nil {
			r.close()
			return nil, err
		}
		r.producers = append(r.producers, js)
	}
	for i := range cfg.consumers {
		nc, err := nats.Connect(cfg.servers, nats.Name(fmt.Sprintf("consumer-%d", i)))
		if err != nil {
			r.close()
			return nil, err
		}
		r.conns = append(r.conns, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			r.close()
			return nil, err
		}
		r.consumers = append(r.consumers, js)
	}
	return r, nil
}

// window is producer i's share of the --inflight publishes.
func (r *round) window(i int) int {
	w := r.cfg.inflight / r.cfg.producers
	if i < r.cfg.inflight%r.cfg.producers {
		w++
	}
	return w
}

func (r *round) close() {
	r.stop()
	for _, nc := range r.conns {
		nc.Close()
	}
}

// run runs the round in the workload's shape and returns how long the
// sends took and, when measured, what each phase cost.
func (r *round) run(ctx context.Context, measured bool, count int64, duration time.Duration) (time.Duration, []benchmeter.CPUDelta, error) {
	phase := func(name string) string {
		if !measured {
			return "warm-up"
		}
		return name
	}
	mixed := r.cfg.workload == "mixed"
	var costs []benchmeter.CPUDelta
	before := benchmeter.SampleCPU(r.cfg.nodePIDs)
	if mixed {
		if err := r.startConsumers(ctx); err != nil {
			return 0, nil, err
		}
	}
	start := time.Now()
	sendDone := r.produce(ctx, count, duration)
	first := "send"
	if mixed {
		first = "mixed"
	}
	sendElapsed, err := r.wait(ctx, phase(first), start, sendDone, mixed)
	if err != nil {
		return 0, nil, err
	}
	if !mixed {
		after := benchmeter.SampleCPU(r.cfg.nodePIDs)
		costs = append(costs, benchmeter.Between(before, after))
		before = benchmeter.SampleCPU(r.cfg.nodePIDs)
		if err := r.startConsumers(ctx); err != nil {
			return 0, nil, err
		}
		done := make(chan struct{})
		close(done)
		if _, err := r.wait(ctx, phase("drain"), r.recvStart, done, true); err != nil {
			return 0, nil, err
		}
	}
	costs = append(costs, benchmeter.Between(before, benchmeter.SampleCPU(r.cfg.nodePIDs)))
	r.stop()
	return sendElapsed, costs, nil
}

// produce publishes count messages (or, with count 0, for duration) and
// closes the returned channel when every publish has an outcome. Each
// producer publishes asynchronously (PublishMsgAsync) and keeps its
// share of the --inflight window awaiting PubAcks: a new publish as soon
// as one of its PubAcks arrives, as a NATS application streaming into
// JetStream does. Its PubAcks are collected in publish order, the order
// in which the stream's leader sends them.
func (r *round) produce(ctx context.Context, count int64, duration time.Duration) <-chan struct{} {
	body := make([]byte, r.cfg.size)
	var pctx context.Context
	var stopProducers context.CancelFunc
	if count > 0 {
		pctx, stopProducers = context.WithCancel(ctx)
	} else {
		pctx, stopProducers = context.WithTimeout(ctx, duration)
	}
	type publish struct {
		ack jetstream.PubAckFuture
		t0  time.Time
	}
	var next atomic.Int64
	var producers sync.WaitGroup
	for i, js := range r.producers {
		window := r.window(i)
		producers.Add(2)
		slots := make(chan struct{}, window)   // a publish awaiting its PubAck holds one
		inFlight := make(chan publish, window) // to the collector, in publish order
		go func() {                            // the collector
			defer producers.Done()
			for p := range inFlight {
				select {
				case <-p.ack.Ok():
					r.sendLat.Add(time.Since(p.t0))
					backlog := r.sent.Add(1) - r.received.Load()
					for {
						top := r.maxBacklog.Load()
						if backlog <= top || r.maxBacklog.CompareAndSwap(top, backlog) {
							break
						}
					}
				case err := <-p.ack.Err():
					r.sendErrs.add(err)
				}
				<-slots
			}
		}()
		go func() { // the publisher
			defer producers.Done()
			defer close(inFlight)
			// The end of the run stops issuing publishes (pctx); the
			// collector still waits for those in flight.
			for pctx.Err() == nil {
				if n := next.Add(1); count > 0 && n > count {
					return
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				t0 := time.Now()
				ack, err := js.PublishMsgAsync(&nats.Msg{Subject: r.subject, Data: body})
				if err != nil {
					r.sendErrs.add(err)
					<-slots
					continue
				}
				inFlight <- publish{ack, t0}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		producers.Wait()
		stopProducers()
		close(done)
	}()
	return done
}

// startConsumers has every consumer take messages with Consume (at most
// cfg.batch buffered each) and ack each in its callback, until stop:
// with a plain Ack, as `nats bench js consume` does and as NATS
// applications do, or with --ack double a DoubleAck, at most cfg.batch
// of them awaiting the server's answer per consumer.
func (r *round) startConsumers(ctx context.Context) error {
	cctx, cancel := context.WithCancel(ctx)
	r.stopConsumers = cancel
	var cons []jetstream.Consumer
	for _, js := range r.consumers {
		c, err := js.Consumer(ctx, r.stream, "bench")
		if err != nil {
			cancel()
			return fmt.Errorf("consumer of %s: %w", r.stream, err)
		}
		cons = append(cons, c)
	}
	r.recvStart = time.Now()
	for _, c := range cons {
		var handler jetstream.MessageHandler
		if r.cfg.ack == "double" {
			acks := make(chan struct{}, r.cfg.batch)
			handler = func(m jetstream.Msg) {
				acks <- struct{}{}
				r.doubleAcks.Add(1)
				go func() {
					defer r.doubleAcks.Done()
					defer func() { <-acks }()
					if err := m.DoubleAck(cctx); err != nil {
						if cctx.Err() == nil {
							r.recvErrs.add(err)
						}
						return
					}
					r.got(m)
				}()
			}
		} else {
			handler = func(m jetstream.Msg) {
				if err := m.Ack(); err != nil {
					r.recvErrs.add(err)
					return
				}
				r.got(m)
			}
		}
		cc, err := c.Consume(handler, jetstream.PullMaxMessages(r.cfg.batch),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if cctx.Err() == nil {
					r.recvErrs.add(err)
				}
			}))
		if err != nil {
			cancel()
			r.stop()
			return fmt.Errorf("consume from %s: %w", r.stream, err)
		}
		r.consuming = append(r.consuming, cc)
	}
	return nil
}

// got counts an acked message.
func (r *round) got(m jetstream.Msg) {
	now := time.Now()
	meta, err := m.Metadata()
	if err != nil || m.Subject() != r.subject {
		r.redelivered.Add(1) // another round's, delivered again
		return
	}
	r.seenMu.Lock()
	_, dup := r.seen[meta.Sequence.Stream]
	r.seen[meta.Sequence.Stream] = struct{}{}
	r.seenMu.Unlock()
	if dup {
		r.redelivered.Add(1)
		return
	}
	r.e2eLat.Add(now.Sub(meta.Timestamp))
	r.received.Add(1)
	r.lastReceive.Store(int64(now.Sub(r.recvStart)))
}

func (r *round) stop() {
	for _, cc := range r.consuming {
		cc.Stop()
		<-cc.Closed()
	}
	r.consuming = nil
	r.stopConsumers()
	r.doubleAcks.Wait()
}

// wait reports progress once a second until the sends are done and, with
// drain, every message sent is received and settled. It returns how
// long after start the sends were done.
func (r *round) wait(ctx context.Context, phase string, start time.Time, sendDone <-chan struct{}, drain bool) (time.Duration, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// Once the sends are done, whether every message is received is
	// checked often, so that the wait for the acks to settle starts
	// with the last receive.
	var check <-chan time.Time
	var sendElapsed time.Duration
	for {
		select {
		case <-sendDone:
			sendElapsed, sendDone = time.Since(start), nil
			if !drain {
				return sendElapsed, nil
			}
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			check = t.C
		case <-check:
		case <-tick.C:
			el := time.Since(start).Seconds()
			fmt.Fprintf(r.progress, "%-7s %5.0fs  sent %9d (%7.0f/s)  received %9d (%7.0f/s)  errors %d\n", phase, el,
				r.sent.Load(), float64(r.sent.Load())/el, r.received.Load(), float64(r.received.Load())/el, r.sendErrs.total()+r.recvErrs.total())
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if sendDone == nil && r.received.Load() >= r.sent.Load() {
			return sendElapsed, r.settle(ctx)
		}
	}
}

// settle waits (cfg.timeout at most) for the stream to be empty and
// notes when it was: a plain Ack has no answer, so it is the stream that
// tells when every ack was committed through the consumer's Raft group
// and applied (work-queue retention removes a message then).
func (r *round) settle(ctx context.Context) error {
	s, err := r.admin.Stream(ctx, r.stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", r.stream, err)
	}
	deadline := time.Now().Add(r.cfg.timeout)
	for {
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s: %w", r.stream, err)
		}
		if info.State.Msgs == 0 || time.Now().After(deadline) {
			r.unsettled, r.settled = info.State.Msgs, time.Since(r.recvStart)
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}
