package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const benchUsage = `Usage:
  raftbus bench [flags]

Runs producers and consumers against a running cluster and reports
throughput and latency. A fresh queue is created for the run (and deleted
after it) unless --queue names an existing one.

Flags:
  --producers n       concurrent senders (default 4)
  --consumers n       concurrent receivers (default 4)
  --inflight n        sends in flight across all producers (default 256)
  --size bytes        message body size (default 1024)
  --partitions n      partitions of the queue created for the run (default 1)
  --mode m            peek-lock (receive + complete) or receive-and-delete
                      (default peek-lock)
  --sessions n        spread messages over n sessions and receive them
                      through sessions (default 0: no sessions)
  --duration d        how long producers send (default 10s)
  --count n           send this many messages instead of for a duration
  --rate n            send at most n messages a second in all (default 0:
                      as fast as the window allows), for latency when
                      traffic is sparse
  --batch n           messages per receive (default 100)
  --queue name        use this queue rather than a new one

Sends carry a MessageId, so the SDK may resend after an unknown outcome.
Latency figures are send-ack (SendMessage call to return) and end-to-end
(the broker's enqueue time to receipt by a consumer, on this machine's
clock).

Examples:
  raftbus bench --duration 30s
  raftbus bench --inflight 1 --producers 1 --consumers 1 --duration 10s
  raftbus bench --inflight 1 --producers 1 --consumers 1 --rate 20 --partitions 16
  raftbus bench --partitions 16 --size 65536 --output json
`

// benchConfig is one run's settings.
type benchConfig struct {
	producers, consumers, inflight, size, partitions, sessions, batch, rate int
	mode                                                                    string
	duration                                                                time.Duration
	count                                                                   int64
	queue                                                                   string
}

// BenchReport is what a run measured (the --output json form).
type BenchReport struct {
	Queue        string `json:"queue"`
	Producers    int    `json:"producers"`
	Consumers    int    `json:"consumers"`
	InFlight     int    `json:"inFlight"`
	MessageBytes int    `json:"messageBytes"`
	Partitions   int    `json:"partitions"`
	Sessions     int    `json:"sessions"`
	ReceiveMode  string `json:"receiveMode"`
	Sent         int64  `json:"sent"`
	SendErrors   int64  `json:"sendErrors"`
	// SendErrorReasons counts the failed sends by reason (the client's
	// Code, e.g. "SERVER_BUSY"), so that a run with errors says which.
	SendErrorReasons map[string]int64 `json:"sendErrorReasons,omitempty"`
	// SendErrorSamples holds the first error message seen per reason.
	SendErrorSamples map[string]string `json:"sendErrorSamples,omitempty"`
	// ReceiveErrors counts the receives and settlements that failed with
	// an error a retry can get past (the run goes on; a message whose
	// settlement was lost comes again), by reason.
	ReceiveErrors       int64             `json:"receiveErrors"`
	ReceiveErrorReasons map[string]int64  `json:"receiveErrorReasons,omitempty"`
	ReceiveErrorSamples map[string]string `json:"receiveErrorSamples,omitempty"`
	Received            int64             `json:"received"`
	Redelivered         int64             `json:"redelivered"`
	SendSeconds         float64           `json:"sendSeconds"`
	ReceiveSeconds      float64           `json:"receiveSeconds"`
	SendPerSecond       float64           `json:"sendMsgsPerSecond"`
	RecvPerSecond       float64           `json:"receiveSettleMsgsPerSecond"`
	SendMBPerSecond     float64           `json:"sendMbPerSecond"`
	SendLatency         LatencyReport     `json:"sendAckLatency"`
	EndToEnd            LatencyReport     `json:"endToEndLatency"`
}

// LatencyReport summarises a latency distribution, in milliseconds.
type LatencyReport struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
}

func runBench(ctx context.Context, a *app, args []string) error {
	var cfg benchConfig
	fs := a.flags("bench")
	fs.IntVar(&cfg.producers, "producers", 4, "")
	fs.IntVar(&cfg.consumers, "consumers", 4, "")
	fs.IntVar(&cfg.inflight, "inflight", 256, "")
	fs.IntVar(&cfg.size, "size", 1024, "")
	fs.IntVar(&cfg.partitions, "partitions", 1, "")
	fs.IntVar(&cfg.sessions, "sessions", 0, "")
	fs.IntVar(&cfg.batch, "batch", 100, "")
	fs.StringVar(&cfg.mode, "mode", "peek-lock", "")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "")
	fs.Int64Var(&cfg.count, "count", 0, "")
	fs.IntVar(&cfg.rate, "rate", 0, "")
	fs.StringVar(&cfg.queue, "queue", "", "")
	if _, err := a.parse(fs, args); err != nil {
		return err
	}
	switch {
	case cfg.producers < 1 || cfg.consumers < 1 || cfg.inflight < 1 || cfg.batch < 1 || cfg.batch > 1000:
		return usagef("--producers, --consumers and --inflight must be at least 1, --batch 1 to 1000")
	case cfg.inflight < cfg.producers:
		return usagef("--inflight (%d) must be at least --producers (%d)", cfg.inflight, cfg.producers)
	case cfg.mode != "peek-lock" && cfg.mode != "receive-and-delete":
		return usagef("--mode is peek-lock or receive-and-delete, not %q", cfg.mode)
	case cfg.size < 0:
		return usagef("--size must not be negative")
	case cfg.rate < 0:
		return usagef("--rate must not be negative")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	adm := admin.NewFromClient(c)
	if cfg.queue == "" {
		cfg.queue = fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
		cctx, cancel := a.withTimeout(ctx)
		_, err := adm.CreateQueue(cctx, cfg.queue, &admin.QueueProperties{
			PartitionCount:  proto.Uint32(uint32(cfg.partitions)),
			RequiresSession: proto.Bool(cfg.sessions > 0),
		})
		cancel()
		if err != nil {
			return fmt.Errorf("create queue %s: %w", cfg.queue, err)
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			adm.DeleteQueue(dctx, cfg.queue)
			cancel()
		}()
	}
	rep, err := bench(ctx, c, cfg, a.stderr)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return a.printJSON(rep)
	}
	printBench(a.stdout, rep)
	return nil
}

// bench runs the producers until the duration or count is reached, and
// the consumers until they have received everything sent (or ctx ends).
func bench(ctx context.Context, c *client.Client, cfg benchConfig, progress io.Writer) (*BenchReport, error) {
	rep := &BenchReport{
		Queue: cfg.queue, Producers: cfg.producers, Consumers: cfg.consumers, InFlight: cfg.inflight,
		MessageBytes: cfg.size, Partitions: cfg.partitions, Sessions: cfg.sessions, ReceiveMode: cfg.mode,
	}
	var sent, received, redelivered atomic.Int64
	var sendErrs, recvErrs errorTally
	// seen tells first deliveries from redeliveries (and from copies of a
	// send the SDK repeated after an unknown outcome).
	var seenMu sync.Mutex
	seen := make(map[string]struct{})
	var sendLat, e2eLat latencies
	sendDone := make(chan struct{})
	start := time.Now()

	// Consumers.
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers sync.WaitGroup
	var recvErr error
	var recvErrOnce sync.Once
	var lastReceive atomic.Int64
	for i := 0; i < cfg.consumers; i++ {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			err := consume(cctx, c, cfg, recvErrs.add, func(msgs []*client.ReceivedMessage) {
				now := time.Now()
				fresh := 0
				seenMu.Lock()
				for _, m := range msgs {
					if _, dup := seen[m.MessageID]; !dup {
						seen[m.MessageID] = struct{}{}
						fresh++
						e2eLat.add(now.Sub(m.EnqueuedTime))
					}
				}
				seenMu.Unlock()
				received.Add(int64(fresh))
				redelivered.Add(int64(len(msgs) - fresh))
				lastReceive.Store(int64(now.Sub(start)))
			})
			if err != nil && cctx.Err() == nil {
				recvErrOnce.Do(func() { recvErr = err; stopConsumers() })
			}
		}()
	}

	// Producers: one Sender each, the in-flight send loops spread over
	// them.
	senders := make([]*client.Sender, cfg.producers)
	for i := range senders {
		s, err := c.NewSender(cfg.queue, nil)
		if err != nil {
			return nil, err
		}
		senders[i] = s
	}
	body := make([]byte, cfg.size)
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	if cfg.count == 0 {
		pctx, stopProducers = context.WithTimeout(ctx, cfg.duration)
		defer stopProducers()
	}
	// pace hands out one send a tick at --rate; a tick no producer is
	// ready for is dropped, so the rate is a ceiling.
	var pace <-chan time.Time
	if cfg.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(cfg.rate))
		defer t.Stop()
		pace = t.C
	}
	var next atomic.Int64
	var producers sync.WaitGroup
	for i := 0; i < cfg.inflight; i++ {
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
				if cfg.count > 0 && n > cfg.count {
					return
				}
				m := &client.Message{MessageID: "bench-" + strconv.FormatInt(n, 10), Body: body}
				if cfg.sessions > 0 {
					m.SessionID = "s" + strconv.FormatInt(n%int64(cfg.sessions), 10)
				}
				t0 := time.Now()
				// The end of the run stops issuing sends (pctx) and lets
				// those in flight finish (ctx), so that every send is
				// either counted or an error.
				if err := sender.SendMessage(ctx, m, nil); err != nil {
					sendErrs.add(err)
					continue
				}
				sendLat.add(time.Since(t0))
				sent.Add(1)
			}
		}()
	}
	go func() {
		producers.Wait()
		close(sendDone)
	}()

	// Progress, once a second, until everything sent is received: one
	// line rewritten on a terminal, a line a second otherwise.
	eol := "\n"
	if f, ok := progress.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			eol = "\r"
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var sendElapsed time.Duration
	sending := true
	for {
		select {
		case <-sendDone:
			if sending {
				sending, sendElapsed = false, time.Since(start)
			}
			sendDone = nil
		case <-tick.C:
			el := time.Since(start).Seconds()
			fmt.Fprintf(progress, "%5.0fs  sent %9d (%7.0f/s)  received %9d (%7.0f/s)  errors %d %s", el,
				sent.Load(), float64(sent.Load())/el, received.Load(), float64(received.Load())/el, sendErrs.total(), eol)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !sending && received.Load() >= sent.Load() {
			break
		}
		if !sending && recvErr != nil {
			break
		}
	}
	if eol == "\r" {
		fmt.Fprintln(progress)
	}
	stopConsumers()
	consumers.Wait()
	if recvErr != nil {
		return nil, fmt.Errorf("receive: %w", recvErr)
	}
	rep.Sent, rep.Received, rep.Redelivered = sent.Load(), received.Load(), redelivered.Load()
	rep.SendErrors, rep.SendErrorReasons, rep.SendErrorSamples = sendErrs.report()
	rep.ReceiveErrors, rep.ReceiveErrorReasons, rep.ReceiveErrorSamples = recvErrs.report()
	rep.SendSeconds = sendElapsed.Seconds()
	rep.ReceiveSeconds = time.Duration(lastReceive.Load()).Seconds()
	if rep.SendSeconds > 0 {
		rep.SendPerSecond = float64(rep.Sent) / rep.SendSeconds
		rep.SendMBPerSecond = rep.SendPerSecond * float64(cfg.size) / 1e6
	}
	if rep.ReceiveSeconds > 0 {
		rep.RecvPerSecond = float64(rep.Received) / rep.ReceiveSeconds
	}
	rep.SendLatency, rep.EndToEnd = sendLat.report(), e2eLat.report()
	return rep, nil
}

// consume receives (and completes, in peek-lock mode) until ctx ends,
// calling got for each batch once it is settled. A failure a retry can
// get past goes to failed and the consumer goes on; another ends it.
func consume(ctx context.Context, c *client.Client, cfg benchConfig, failed func(error), got func([]*client.ReceivedMessage)) error {
	mode := client.ReceiveModePeekLock
	if cfg.mode == "receive-and-delete" {
		mode = client.ReceiveModeReceiveAndDelete
	}
	opts := &client.ReceiveMessagesOptions{MaxWaitTime: time.Second}
	drain := func(r *client.Receiver) (int, error) {
		msgs, err := r.ReceiveMessages(ctx, cfg.batch, opts)
		if err != nil {
			return 0, retried(ctx, err, failed)
		}
		var settleErr error
		if mode == client.ReceiveModePeekLock {
			settleErr = completeAll(ctx, r, msgs, failed)
		}
		got(msgs)
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

// completeAll completes a batch concurrently: settlement is one round
// trip each, and the partition batches them into shared log entries.
func completeAll(ctx context.Context, r *client.Receiver, msgs []*client.ReceivedMessage, failed func(error)) error {
	errs := make(chan error, len(msgs))
	for _, m := range msgs {
		go func() { errs <- r.CompleteMessage(ctx, m, nil) }()
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

// errorTally counts errors by reason and keeps the first message of each.
type errorTally struct {
	mu      sync.Mutex
	n       int64
	reasons map[string]int64
	samples map[string]string
}

func (t *errorTally) add(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reasons == nil {
		t.reasons, t.samples = make(map[string]int64), make(map[string]string)
	}
	t.n++
	reason := errorReason(err)
	if t.reasons[reason]++; t.reasons[reason] == 1 {
		t.samples[reason] = err.Error()
	}
}

func (t *errorTally) total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *errorTally) report() (int64, map[string]int64, map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.reasons, t.samples
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report() LatencyReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return LatencyReport{}
	}
	slices.Sort(l.d)
	at := func(q float64) float64 {
		return float64(l.d[min(int(q*float64(len(l.d))), len(l.d)-1)]) / float64(time.Millisecond)
	}
	return LatencyReport{Count: int64(len(l.d)), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: at(1)}
}

func printBench(w io.Writer, r *BenchReport) {
	fmt.Fprintf(w, "queue %s: %d partition(s), %d producers, %d consumers, %d in flight, %d-byte messages, %s",
		r.Queue, r.Partitions, r.Producers, r.Consumers, r.InFlight, r.MessageBytes, r.ReceiveMode)
	if r.Sessions > 0 {
		fmt.Fprintf(w, ", %d sessions", r.Sessions)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "send:            %9d msgs in %6.2fs  %9.0f msgs/s  %7.2f MB/s  (%d errors)\n", r.Sent, r.SendSeconds, r.SendPerSecond, r.SendMBPerSecond, r.SendErrors)
	printErrors(w, "send errors:", r.SendErrorReasons, r.SendErrorSamples)
	fmt.Fprintf(w, "receive+settle:  %9d msgs in %6.2fs  %9.0f msgs/s  (%d delivered again, %d errors)\n", r.Received, r.ReceiveSeconds, r.RecvPerSecond, r.Redelivered, r.ReceiveErrors)
	printErrors(w, "receive errors:", r.ReceiveErrorReasons, r.ReceiveErrorSamples)
	for _, l := range []struct {
		name string
		l    LatencyReport
	}{{"send-ack", r.SendLatency}, {"end-to-end", r.EndToEnd}} {
		fmt.Fprintf(w, "%-16s p50 %8.2f ms  p90 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", l.name+":", l.l.P50, l.l.P90, l.l.P99, l.l.Max)
	}
}

// printErrors prints the errors of a kind by reason, with the first
// message of each.
func printErrors(w io.Writer, title string, reasons map[string]int64, samples map[string]string) {
	if len(reasons) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(reasons))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, reasons[n])
	}
	fmt.Fprintf(w, "%-16s %s\n", title, strings.Join(parts, ", "))
	for _, n := range names {
		fmt.Fprintf(w, "  first %s: %s\n", n, samples[n])
	}
}

// errorReason names the reason of a failed call for the report.
func errorReason(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code.String()
	}
	return "OTHER"
}
