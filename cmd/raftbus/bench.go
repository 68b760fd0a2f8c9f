package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/benchmeter"
	"github.com/raftbus/raftbus/internal/gctune"
)

const benchUsage = `Usage:
  raftbus bench [flags]

Runs producers and consumers against a running cluster and reports
throughput, latency and what each message cost. A fresh queue is created
for the run (and deleted after it) unless --queue names an existing one.

Flags:
  --workload w        mixed: producers and consumers at once; phased: send
                      every message first, then receive (and complete)
                      them all; fill: only send, leaving the messages in
                      --queue; drain: only receive --count messages from
                      --queue, as a fill left them; create: create
                      --count queues named --queue-000000 on, each
                      followed by one send, and report how long each
                      create and first send took; send-each: one send
                      to each of the queues a create made, timed (the
                      first request to a quiet queue, or after a node's
                      loss); delete: delete the queues a create made
                      (default mixed)
  --producers n       concurrent senders, or clients of a create or delete
                      (default 4)
  --consumers n       concurrent receivers (default 4)
  --inflight n        the window: sends in flight across all producers, each
                      a SendMessage call of one message (default 256)
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
  --warmup n          first send and receive n messages the same way,
                      uncounted (default 0)
  --node-pids p,p,..  process ids of the cluster's raftbusd processes on
                      this machine, for CPU per message
  --queue name        use this queue rather than a new one
  --cpuprofile file   write this process's CPU profile over the run (for
                      go tool pprof; the nodes' come from raftbusd --pprof)

Sends carry a MessageId, so the SDK may resend after an unknown outcome;
the SDK coalesces concurrent sends (and completes) to one leader node into
one request. Each of a receive's messages is completed by its own call,
all at once. Latency figures are send-ack (SendMessage call to return) and
end-to-end (the broker's enqueue time, in whole milliseconds, to the
return of the receive that got the message, before it is settled, on
this machine's clock); in a phased run end-to-end is mostly the wait for
the drain. The backlog is the most messages sent and not yet received.

Per phase (mixed; or send, drain and both of phased) the run reports:
  CPU per message   utime+stime of this process and of the --node-pids
                    processes (/proc/<pid>/stat) over the phase, per
                    message (a message of a mixed run or a drain is sent,
                    received and completed); without --node-pids the
                    client's alone
  machine CPU       all CPUs' busy time (/proc/stat: user, nice, system,
                    irq, softirq) per message, whatever ran
  foreign load      machine busy time not used by this process or the
                    nodes, in cores; a run where it is over 5% of the
                    machine's cores is flagged: other work slowed it
  syncs per message the nodes' log syncs (fdatasync), summed over the nodes
  msgs per entry    messages per Raft entry: messages over the growth of
                    the commit indexes of the queue's partitions

Examples:
  raftbus bench --duration 30s
  raftbus bench --inflight 1 --producers 1 --consumers 1 --duration 10s
  raftbus bench --inflight 1 --producers 1 --consumers 1 --rate 20 --partitions 16
  raftbus bench --partitions 16 --size 65536 --output json
  raftbus bench --workload phased --count 100000 --warmup 10000 --consumers 8 \
      --node-pids "$(cat .run/cluster/n*.pid | paste -sd,)"
  raftbus bench --workload fill --queue backlog --count 1000000
  raftbus bench --workload drain --queue backlog --count 1000000
  raftbus bench --workload create --queue tenant --count 1000 --producers 8

A fill and a drain are apart so that what lies between them (a restart,
a look at each node's memory and disk) can be measured: see
scripts/bench-backlog.sh.
`

// benchConfig is one run's settings.
type benchConfig struct {
	producers, consumers, inflight, size, partitions, sessions, batch, rate int
	workload, mode                                                          string
	duration                                                                time.Duration
	count, warmup                                                           int64
	queue                                                                   string
	nodePIDs                                                                []int
}

// BenchReport is what a run measured (the --output json form).
type BenchReport struct {
	Queue        string `json:"queue"`
	Workload     string `json:"workload"`
	Producers    int    `json:"producers"`
	Consumers    int    `json:"consumers"`
	InFlight     int    `json:"inFlight"`
	MessageBytes int    `json:"messageBytes"`
	Partitions   int    `json:"partitions"`
	Sessions     int    `json:"sessions"`
	ReceiveMode  string `json:"receiveMode"`
	// ReceiveBatch is the most messages a receive asks for; Shape says in
	// words how messages travel (the window and the batches).
	ReceiveBatch   int    `json:"receiveBatch"`
	Shape          string `json:"shape"`
	WarmupMessages int64  `json:"warmupMessages"`
	Sent           int64  `json:"sent"`
	SendErrors     int64  `json:"sendErrors"`
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
	// MaxBacklog is the most messages sent and not yet received at any
	// moment (all of them, in a phased run).
	MaxBacklog      int64         `json:"maxBacklog"`
	SendSeconds     float64       `json:"sendSeconds"`
	ReceiveSeconds  float64       `json:"receiveSeconds"`
	SendPerSecond   float64       `json:"sendMsgsPerSecond"`
	RecvPerSecond   float64       `json:"receiveSettleMsgsPerSecond"`
	SendMBPerSecond float64       `json:"sendMbPerSecond"`
	SendLatency     LatencyReport `json:"sendAckLatency"`
	EndToEnd        LatencyReport `json:"endToEndLatency"`
	// Phases is what each phase cost: one for a mixed run; send, drain
	// and the two together for a phased one.
	Phases []PhaseReport `json:"phases"`
	// ForeignLoad is set when another phase's foreign load was over the
	// threshold: the figures are of a machine busy with other work too.
	ForeignLoad bool `json:"foreignLoad"`
}

// LatencyReport and CPUReport are measured as the peer harness measures
// them (see internal/benchmeter).
type (
	LatencyReport = benchmeter.LatencyReport
	CPUReport     = benchmeter.CPUReport
)

// PhaseReport is what one phase of a run did and cost; a figure that
// could not be read is left out.
type PhaseReport struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Messages is what the per-message figures divide by: messages sent
	// in a send phase, received otherwise.
	Messages         int64      `json:"messages"`
	CPU              *CPUReport `json:"cpu,omitempty"`
	CPUUnavailable   string     `json:"cpuUnavailable,omitempty"`
	NodeLogSyncs     *int64     `json:"nodeLogSyncs,omitempty"`
	SyncsPerMessage  *float64   `json:"nodeLogSyncsPerMessage,omitempty"`
	RaftEntries      *int64     `json:"raftEntries,omitempty"`
	MessagesPerEntry *float64   `json:"messagesPerRaftEntry,omitempty"`
	// Heap allocation per message, of the nodes together (unset when a
	// node did not say) and of this process.
	NodeAllocatedBytesPerMessage   *float64 `json:"nodeAllocatedBytesPerMessage,omitempty"`
	NodeAllocationsPerMessage      *float64 `json:"nodeAllocationsPerMessage,omitempty"`
	ClientAllocatedBytesPerMessage *float64 `json:"clientAllocatedBytesPerMessage,omitempty"`
	ClientAllocationsPerMessage    *float64 `json:"clientAllocationsPerMessage,omitempty"`
}

func runBench(ctx context.Context, a *app, args []string) error {
	var cfg benchConfig
	var pids, cpuProfile string
	fs := a.flags("bench")
	fs.StringVar(&cfg.workload, "workload", "mixed", "")
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
	fs.Int64Var(&cfg.warmup, "warmup", 0, "")
	fs.IntVar(&cfg.rate, "rate", 0, "")
	fs.StringVar(&pids, "node-pids", "", "")
	fs.StringVar(&cfg.queue, "queue", "", "")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "")
	if _, err := a.parse(fs, args); err != nil {
		return err
	}
	switch {
	case !slices.Contains([]string{"mixed", "phased", "fill", "drain", "create", "send-each", "delete"}, cfg.workload):
		return usagef("--workload is mixed, phased, fill, drain, create, send-each or delete, not %q", cfg.workload)
	case slices.Contains([]string{"fill", "drain", "create", "send-each", "delete"}, cfg.workload) && (cfg.queue == "" || cfg.count == 0 || cfg.warmup > 0):
		return usagef("--workload %s needs --queue and --count, and no --warmup", cfg.workload)
	case cfg.producers < 1 || cfg.consumers < 1 || cfg.inflight < 1 || cfg.batch < 1 || cfg.batch > 1000:
		return usagef("--producers, --consumers and --inflight must be at least 1, --batch 1 to 1000")
	case cfg.inflight < cfg.producers:
		return usagef("--inflight (%d) must be at least --producers (%d)", cfg.inflight, cfg.producers)
	case cfg.mode != "peek-lock" && cfg.mode != "receive-and-delete":
		return usagef("--mode is peek-lock or receive-and-delete, not %q", cfg.mode)
	case cfg.size < 0:
		return usagef("--size must not be negative")
	case cfg.rate < 0 || cfg.count < 0 || cfg.warmup < 0:
		return usagef("--rate, --count and --warmup must not be negative")
	}
	var err error
	if cfg.nodePIDs, err = benchmeter.ParsePIDs(pids); err != nil {
		return usagef("--node-pids: %v", err)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	if cfg.workload == "create" || cfg.workload == "send-each" || cfg.workload == "delete" {
		rep := benchEntities(ctx, c, cfg)
		if a.output == "json" {
			return a.printJSON(rep)
		}
		printEntities(a.stdout, rep)
		return nil
	}
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
	meter := &costMeter{adm: adm, queue: cfg.queue, nodePIDs: cfg.nodePIDs, timeout: a.timeout}
	// The load generator's garbage collection is the harness's cost, not
	// the broker's: collect as raftbusd does (bench/peers does the same).
	defer gctune.Start()()
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep, err := bench(ctx, c, meter, cfg, a.stderr)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return a.printJSON(rep)
	}
	printBench(a.stdout, rep)
	return nil
}

// bench runs the warm-up, if any, then the measured round: in a mixed
// run the producers until the duration or count is reached and the
// consumers meanwhile, until they have received everything sent (or ctx
// ends); in a phased run the producers, then the consumers; in a fill
// the producers alone, in a drain the consumers alone.
func bench(ctx context.Context, c *client.Client, meter *costMeter, cfg benchConfig, progress io.Writer) (*BenchReport, error) {
	if cfg.warmup > 0 {
		w := newRound(c, cfg, "warmup-", progress)
		if _, _, err := w.run(ctx, nil, cfg.warmup, 0); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	r := newRound(c, cfg, "bench-", progress)
	sendElapsed, costs, err := r.run(ctx, meter, cfg.count, cfg.duration)
	if err != nil {
		return nil, err
	}
	rep := &BenchReport{
		Queue: cfg.queue, Workload: cfg.workload, Producers: cfg.producers, Consumers: cfg.consumers, InFlight: cfg.inflight,
		MessageBytes: cfg.size, Partitions: cfg.partitions, Sessions: cfg.sessions, ReceiveMode: cfg.mode,
		ReceiveBatch: cfg.batch, Shape: shape(cfg), WarmupMessages: cfg.warmup,
	}
	rep.Sent, rep.Received, rep.Redelivered = r.sent.Load(), r.received.Load(), r.redelivered.Load()
	rep.MaxBacklog = r.maxBacklog.Load()
	rep.SendErrors, rep.SendErrorReasons, rep.SendErrorSamples = r.sendErrs.report()
	rep.ReceiveErrors, rep.ReceiveErrorReasons, rep.ReceiveErrorSamples = r.recvErrs.report()
	rep.SendSeconds = sendElapsed.Seconds()
	rep.ReceiveSeconds = time.Duration(r.lastReceive.Load()).Seconds()
	if rep.SendSeconds > 0 {
		rep.SendPerSecond = float64(rep.Sent) / rep.SendSeconds
		rep.SendMBPerSecond = rep.SendPerSecond * float64(cfg.size) / 1e6
	}
	if rep.ReceiveSeconds > 0 {
		rep.RecvPerSecond = float64(rep.Received) / rep.ReceiveSeconds
	}
	rep.SendLatency, rep.EndToEnd = r.sendLat.Report(), r.e2eLat.Report()
	nodes := len(cfg.nodePIDs)
	switch cfg.workload {
	case "mixed":
		rep.Phases = []PhaseReport{costs[0].report("mixed", rep.Received, nodes)}
	case "fill":
		rep.Phases = []PhaseReport{costs[0].report("fill", rep.Sent, nodes)}
	case "drain":
		rep.Phases = []PhaseReport{costs[0].report("drain", rep.Received, nodes)}
	default:
		rep.Phases = []PhaseReport{costs[0].report("send", rep.Sent, nodes), costs[1].report("drain", rep.Received, nodes),
			costs[0].plus(costs[1]).report("send+drain", rep.Received, nodes)}
	}
	for _, p := range rep.Phases {
		if p.CPU != nil {
			rep.ForeignLoad = rep.ForeignLoad || p.CPU.ForeignLoad
		}
	}
	return rep, nil
}

// run runs the round in the workload's shape, sending count messages (or
// for duration), and returns how long the sends took and, with a meter,
// what each phase cost.
func (r *round) run(ctx context.Context, meter *costMeter, count int64, duration time.Duration) (time.Duration, []costDelta, error) {
	phase := func(name string) string {
		if meter == nil {
			return "warm-up"
		}
		return name
	}
	var costs []costDelta
	var before costSample
	measure := func(start bool) {
		switch {
		case meter == nil:
		case start:
			before = meter.sampleBefore(ctx)
		default:
			costs = append(costs, between(before, meter.sampleAfter(ctx)))
		}
	}
	defer r.stop()
	measure(true)
	var sendElapsed time.Duration
	workload := r.cfg.workload
	if workload == "drain" {
		// The fill's messages are the round's: they carry its prefix.
		r.sent.Store(count)
	} else {
		if workload == "mixed" {
			r.startConsumers(ctx)
		}
		start := time.Now()
		sendDone, err := r.produce(ctx, count, duration)
		if err != nil {
			return 0, nil, err
		}
		first := map[string]string{"mixed": "mixed", "phased": "send", "fill": "fill"}[workload]
		if sendElapsed, err = r.wait(ctx, phase(first), start, sendDone, workload == "mixed"); err != nil {
			return 0, nil, err
		}
	}
	if workload == "phased" || workload == "drain" {
		if workload == "phased" {
			measure(false)
			measure(true)
		}
		r.startConsumers(ctx)
		if _, err := r.wait(ctx, phase("drain"), r.recvStart, closed, true); err != nil {
			return 0, nil, err
		}
	}
	measure(false)
	if err := r.stop(); err != nil {
		return 0, nil, fmt.Errorf("receive: %w", err)
	}
	return sendElapsed, costs, nil
}

// closed is a channel that is always ready.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// shape says how the run's messages travel, for the report.
func shape(cfg benchConfig) string {
	settle := "each completed by its own CompleteMessage call, all of a receive's at once (completes to one leader node travel in one request)"
	if cfg.mode == "receive-and-delete" {
		settle = "removed by the receive (receive-and-delete)"
	}
	return fmt.Sprintf("window of %d sends in flight over %d senders, each a SendMessage call of one message "+
		"(concurrent sends to one leader node travel in one request); %d receivers taking up to %d messages a receive, %s",
		cfg.inflight, cfg.producers, cfg.consumers, cfg.batch, settle)
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

func printBench(w io.Writer, r *BenchReport) {
	fmt.Fprintf(w, "queue %s: %s workload, %d partition(s), %d producers, %d consumers, %d in flight, %d-byte messages, %s",
		r.Queue, r.Workload, r.Partitions, r.Producers, r.Consumers, r.InFlight, r.MessageBytes, r.ReceiveMode)
	if r.Sessions > 0 {
		fmt.Fprintf(w, ", %d sessions", r.Sessions)
	}
	if r.WarmupMessages > 0 {
		fmt.Fprintf(w, ", after a warm-up of %d", r.WarmupMessages)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "shape:           %s\n", r.Shape)
	fmt.Fprintf(w, "send:            %9d msgs in %6.2fs  %9.0f msgs/s  %7.2f MB/s  (%d errors)\n", r.Sent, r.SendSeconds, r.SendPerSecond, r.SendMBPerSecond, r.SendErrors)
	printErrors(w, "send errors:", r.SendErrorReasons, r.SendErrorSamples)
	fmt.Fprintf(w, "receive+settle:  %9d msgs in %6.2fs  %9.0f msgs/s  (%d delivered again, %d errors)\n", r.Received, r.ReceiveSeconds, r.RecvPerSecond, r.Redelivered, r.ReceiveErrors)
	printErrors(w, "receive errors:", r.ReceiveErrorReasons, r.ReceiveErrorSamples)
	fmt.Fprintf(w, "backlog:         at most %d messages sent and not yet received\n", r.MaxBacklog)
	for _, l := range []struct {
		name string
		l    LatencyReport
	}{{"send-ack", r.SendLatency}, {"end-to-end", r.EndToEnd}} {
		fmt.Fprintf(w, "%-16s p50 %8.2f ms  p90 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", l.name+":", l.l.P50, l.l.P90, l.l.P99, l.l.Max)
	}
	for _, p := range r.Phases {
		fmt.Fprintf(w, "%-16s %s\n", "cost, "+p.Name+":", phaseLine(p))
	}
	if r.ForeignLoad {
		fmt.Fprintln(w, "FOREIGN LOAD: other work used the machine during the run (see foreign cores); the figures are of a shared machine")
	}
}

// phaseLine is a phase's cost in one line.
func phaseLine(p PhaseReport) string {
	var parts []string
	if c := p.CPU; c != nil {
		nodes := fmt.Sprintf("%d nodes %.2fs", c.NodeProcesses, c.NodeSeconds)
		if c.NodeProcesses == 0 {
			nodes = "nodes not counted: no --node-pids"
		}
		parts = append(parts, fmt.Sprintf("CPU %.1f µs/msg (client %.2fs, %s), machine %.1f µs/msg, foreign %.2f cores, steal %.2f cores",
			c.MicrosPerMessage, c.ClientSeconds, nodes, c.MachineMicrosPerMessage, c.ForeignCores, c.StealCores))
	} else {
		parts = append(parts, "CPU not measured: "+p.CPUUnavailable)
	}
	if p.SyncsPerMessage != nil {
		parts = append(parts, fmt.Sprintf("%.3f node log syncs/msg", *p.SyncsPerMessage))
	}
	if p.MessagesPerEntry != nil {
		parts = append(parts, fmt.Sprintf("%.1f msgs per Raft entry", *p.MessagesPerEntry))
	}
	if p.ClientAllocatedBytesPerMessage != nil {
		nodes := "nodes not known"
		if p.NodeAllocatedBytesPerMessage != nil {
			nodes = fmt.Sprintf("nodes %.1f KiB in %.0f objects", *p.NodeAllocatedBytesPerMessage/1024, *p.NodeAllocationsPerMessage)
		}
		parts = append(parts, fmt.Sprintf("allocated per msg: %s, client %.1f KiB in %.0f objects",
			nodes, *p.ClientAllocatedBytesPerMessage/1024, *p.ClientAllocationsPerMessage))
	}
	return fmt.Sprintf("%d msgs in %.2fs: %s", p.Messages, p.Seconds, strings.Join(parts, ", "))
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

// startCPUProfile profiles this process into the file name until the
// returned stop is called.
func startCPUProfile(name string) (stop func(), err error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
