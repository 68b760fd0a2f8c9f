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
	cfg              config
	stream, subject  string
	progress         io.Writer
	label            string
	producers        []jetstream.JetStream
	consumers        []jetstream.JetStream
	conns            []*nats.Conn
	sent, received   atomic.Int64
	redelivered      atomic.Int64
	maxBacklog       atomic.Int64
	sendErrs         errorTally
	recvErrs         errorTally
	sendLat, e2eLat  benchmeter.Latencies
	seenMu           sync.Mutex
	seen             map[uint64]struct{} // stream sequences received
	recvStart        time.Time
	lastReceive      atomic.Int64 // since recvStart
	stopConsumers    context.CancelFunc
	consumersRunning sync.WaitGroup
}

// newRound connects every producer and consumer, before anything is
// measured.
func newRound(cfg config, stream, label string, progress io.Writer) (*round, error) {
	r := &round{cfg: cfg, stream: stream, subject: stream + "." + label, label: label, progress: progress,
		seen: make(map[uint64]struct{}), stopConsumers: func() {}}
	connect := func(name string) (jetstream.JetStream, error) {
		nc, err := nats.Connect(cfg.servers, nats.Name(name))
		if err != nil {
			return nil, err
		}
		r.conns = append(r.conns, nc)
		return jetstream.New(nc)
	}
	for i := range cfg.producers {
		js, err := connect(fmt.Sprintf("producer-%d", i))
		if err != nil {
			r.close()
			return nil, err
		}
		r.producers = append(r.producers, js)
	}
	for i := range cfg.consumers {
		js, err := connect(fmt.Sprintf("consumer-%d", i))
		if err != nil {
			r.close()
			return nil, err
		}
		r.consumers = append(r.consumers, js)
	}
	return r, nil
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

// produce publishes count messages (or, with count 0, for duration) from
// cfg.inflight goroutines spread over the producers' connections, each
// waiting for its PubAck, and closes the returned channel when every
// publish has an outcome.
func (r *round) produce(ctx context.Context, count int64, duration time.Duration) <-chan struct{} {
	body := make([]byte, r.cfg.size)
	var pctx context.Context
	var stopProducers context.CancelFunc
	if count > 0 {
		pctx, stopProducers = context.WithCancel(ctx)
	} else {
		pctx, stopProducers = context.WithTimeout(ctx, duration)
	}
	var next atomic.Int64
	var producers sync.WaitGroup
	for i := 0; i < r.cfg.inflight; i++ {
		producers.Add(1)
		js := r.producers[i%len(r.producers)]
		go func() {
			defer producers.Done()
			for pctx.Err() == nil {
				if n := next.Add(1); count > 0 && n > count {
					return
				}
				t0 := time.Now()
				// The end of the run stops issuing publishes (pctx) and
				// lets those in flight finish (ctx).
				if _, err := js.Publish(ctx, r.subject, body); err != nil {
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
		close(done)
	}()
	return done
}

// startConsumers has every consumer pull continuously and ack each
// message with DoubleAck as it comes, at most cfg.batch acks in flight
// each, until stop.
func (r *round) startConsumers(ctx context.Context) error {
	cctx, cancel := context.WithCancel(ctx)
	r.stopConsumers = cancel
	var iters []jetstream.MessagesContext
	for _, js := range r.consumers {
		cons, err := js.Consumer(ctx, r.stream, "bench")
		if err != nil {
			cancel()
			return fmt.Errorf("consumer of %s: %w", r.stream, err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(r.cfg.batch))
		if err != nil {
			cancel()
			return fmt.Errorf("pull from %s: %w", r.stream, err)
		}
		iters = append(iters, it)
	}
	r.recvStart = time.Now()
	for _, it := range iters {
		r.consumersRunning.Add(1)
		go func() {
			defer r.consumersRunning.Done()
			defer it.Stop()
			acks := make(chan struct{}, r.cfg.batch)
			defer func() {
				for range r.cfg.batch {
					acks <- struct{}{} // every ack has ended
				}
			}()
			for cctx.Err() == nil {
				m, err := it.Next(jetstream.NextContext(cctx))
				if err != nil {
					if cctx.Err() == nil {
						r.recvErrs.add(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				acks <- struct{}{}
				go func() {
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
		}()
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
	r.stopConsumers()
	r.consumersRunning.Wait()
}

// wait reports progress once a second until the sends are done and, with
// drain, every message sent is received. It returns how long after start
// the sends were done.
func (r *round) wait(ctx context.Context, phase string, start time.Time, sendDone <-chan struct{}, drain bool) (time.Duration, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var sendElapsed time.Duration
	sending := true
	for {
		select {
		case <-sendDone:
			sending, sendElapsed, sendDone = false, time.Since(start), nil
		case <-tick.C:
			el := time.Since(start).Seconds()
			fmt.Fprintf(r.progress, "%-7s %5.0fs  sent %9d (%7.0f/s)  received %9d (%7.0f/s)  errors %d\n", phase, el,
				r.sent.Load(), float64(r.sent.Load())/el, r.received.Load(), float64(r.received.Load())/el, r.sendErrs.total()+r.recvErrs.total())
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if !sending && (!drain || r.received.Load() >= r.sent.Load()) {
			return sendElapsed, nil
		}
	}
}
