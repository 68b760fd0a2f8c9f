// Command peers runs the workload of `raftbus bench` against NATS
// JetStream, so that raftbus can be compared with it on the same machine
// (scripts/bench-peers.sh). It is a module of its own: the broker does not
// depend on NATS.
//
// Each broker is driven the way its own clients and its own benchmark
// tool drive it, with the same number of messages in flight. What stands
// for what:
//   - a queue is a stream with work-queue retention and file storage, of
//     --replicas replicas, read through one durable pull consumer with
//     explicit acks, of as many replicas, that lets --consumers x --batch
//     messages await their acks (MaxAckPending), as `nats bench` sets it;
//   - a send is an asynchronous JetStream publish (PublishMsgAsync),
//     counted when its PubAck arrives (the stream stored the message on
//     a quorum of its replicas); each producer keeps its share of the
//     --inflight window of publishes awaiting their PubAcks, a new one as
//     soon as one is answered, where `nats bench js pub async` publishes
//     --batch and then waits for all of them;
//   - a receive+complete is a message taken with Consume (at most --batch
//     buffered per consumer) and acked in the callback with a plain Ack,
//     as `nats bench js consume` and NATS applications do. A plain Ack
//     is not answered, so the run's receive time ends when the stream is
//     empty: with work-queue retention a message leaves the stream once
//     its ack is committed through the consumer's Raft group and applied,
//     which is what a raftbus Complete waits for. With --ack double each
//     message is acked with DoubleAck (AckSync), which the server answers
//     at that point, at most --batch awaiting their answers per consumer;
//   - every producer and consumer has its own connection (as `nats bench`
//     does), to a server the client picks from --servers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/raftbus/raftbus/internal/benchmeter"
	"github.com/raftbus/raftbus/internal/gctune"
)

// config is one run's settings; the flags mean what they mean to
// `raftbus bench`.
type config struct {
	servers                                     string
	workload                                    string
	ack                                         string
	timeout                                     time.Duration
	producers, consumers, inflight, size, batch int
	replicas                                    int
	duration                                    time.Duration
	count, warmup                               int64
	nodePIDs                                    []int
	output                                      string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config
	var pids string
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.servers, "servers", nats.DefaultURL, "NATS server URLs, comma-separated")
	fs.StringVar(&cfg.workload, "workload", "mixed", "mixed or phased")
	fs.IntVar(&cfg.producers, "producers", 4, "producers, each with its own connection")
	fs.IntVar(&cfg.consumers, "consumers", 4, "consumers, each with its own connection")
	fs.IntVar(&cfg.inflight, "inflight", 256, "publishes in flight across all producers")
	fs.IntVar(&cfg.size, "size", 1024, "message body size")
	fs.IntVar(&cfg.batch, "batch", 100, "messages a consumer buffers (and, with --ack double, DoubleAcks it awaits)")
	fs.StringVar(&cfg.ack, "ack", "ack", "ack (a plain Ack; the stream tells when they settled) or double (DoubleAck, answered once settled)")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "how long a publish waits for its PubAck, and the end of a run for the acks to settle")
	fs.IntVar(&cfg.replicas, "replicas", 3, "replicas of the stream and its consumer")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long producers send")
	fs.Int64Var(&cfg.count, "count", 0, "send this many messages instead of for a duration")
	fs.Int64Var(&cfg.warmup, "warmup", 0, "first send and receive this many, uncounted")
	fs.StringVar(&pids, "node-pids", "", "pids of the nats-server processes, comma-separated, for CPU per message")
	fs.StringVar(&cfg.output, "output", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case cfg.workload != "mixed" && cfg.workload != "phased":
		return fmt.Errorf("--workload is mixed or phased, not %q", cfg.workload)
	case cfg.producers < 1 || cfg.consumers < 1 || cfg.inflight < cfg.producers || cfg.batch < 1:
		return fmt.Errorf("--producers, --consumers and --batch must be at least 1, --inflight at least --producers")
	case cfg.ack != "ack" && cfg.ack != "double":
		return fmt.Errorf("--ack is ack or double, not %q", cfg.ack)
	case cfg.timeout <= 0:
		return fmt.Errorf("--timeout must be positive")
	case cfg.output != "text" && cfg.output != "json":
		return fmt.Errorf("--output is text or json, not %q", cfg.output)
	}
	var err error
	if cfg.nodePIDs, err = benchmeter.ParsePIDs(pids); err != nil {
		return fmt.Errorf("--node-pids: %w", err)
	}

	nc, err := nats.Connect(cfg.servers, nats.Name("peers-admin"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano()%1e9)
	if err := createStream(ctx, js, name, cfg); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		js.DeleteStream(dctx, name)
	}()
	version := nc.ConnectedServerVersion()
	// Collect garbage as `raftbus bench` does, so that neither harness's
	// collections weigh more in the CPU per message.
	defer gctune.Start()()
	rep, err := bench(ctx, cfg, js, name, stderr)
	if err != nil {
		return err
	}
	rep.Broker, rep.Stream = "nats-server "+version, name
	if cfg.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(stdout, rep)
	return nil
}

// createStream makes the run's stream and its consumer, waiting (30 s at
// most) for a cluster that has just started to elect its leaders.
func createStream(ctx context.Context, js jetstream.JetStream, name string, cfg config) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := func() error {
			s, err := js.CreateStream(cctx, jetstream.StreamConfig{
				Name: name, Subjects: []string{name + ".>"},
				Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: cfg.replicas,
			})
			if err != nil {
				return fmt.Errorf("create stream %s: %w", name, err)
			}
			_, err = s.CreateOrUpdateConsumer(cctx, jetstream.ConsumerConfig{
				Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
				MaxAckPending: cfg.consumers * cfg.batch, Replicas: cfg.replicas,
			})
			if err != nil {
				return fmt.Errorf("create consumer of %s: %w", name, err)
			}
			return nil
		}()
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// bench runs the warm-up, if any, then the measured round, in the
// workload's shape, and reports.
func bench(ctx context.Context, cfg config, admin jetstream.JetStream, stream string, progress io.Writer) (*Report, error) {
	if cfg.warmup > 0 {
		w, err := newRound(cfg, admin, stream, "warmup", progress)
		if err != nil {
			return nil, err
		}
		_, _, err = w.run(ctx, false, cfg.warmup, 0)
		w.close()
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	r, err := newRound(cfg, admin, stream, "run", progress)
	if err != nil {
		return nil, err
	}
	defer r.close()
	sendElapsed, costs, err := r.run(ctx, true, cfg.count, cfg.duration)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Workload: cfg.workload, Producers: cfg.producers, Consumers: cfg.consumers, InFlight: cfg.inflight,
		MessageBytes: cfg.size, Replicas: cfg.replicas, ReceiveBatch: cfg.batch, WarmupMessages: cfg.warmup,
		AckMode: cfg.ack, Shape: shape(cfg),
	}
	rep.Sent, rep.Received, rep.Redelivered = r.sent.Load(), r.received.Load(), r.redelivered.Load()
	rep.MaxBacklog = r.maxBacklog.Load()
	rep.SendErrors, rep.SendErrorReasons, rep.SendErrorSamples = r.sendErrs.report()
	rep.ReceiveErrors, rep.ReceiveErrorReasons, rep.ReceiveErrorSamples = r.recvErrs.report()
	rep.SendSeconds = sendElapsed.Seconds()
	rep.ReceiveSeconds = r.settled.Seconds()
	rep.SettleMs = float64(r.settled-time.Duration(r.lastReceive.Load())) / 1e6
	rep.Unsettled = r.unsettled
	if rep.SendSeconds > 0 {
		rep.SendPerSecond = float64(rep.Sent) / rep.SendSeconds
		rep.SendMBPerSecond = rep.SendPerSecond * float64(cfg.size) / 1e6
	}
	if rep.ReceiveSeconds > 0 {
		rep.RecvPerSecond = float64(rep.Received) / rep.ReceiveSeconds
	}
	rep.SendLatency, rep.EndToEnd = r.sendLat.Report(), r.e2eLat.Report()
	if cfg.workload == "mixed" {
		rep.Phases = []PhaseReport{phaseReport(costs[0], "mixed", rep.Received, len(cfg.nodePIDs))}
	} else {
		rep.Phases = []PhaseReport{phaseReport(costs[0], "send", rep.Sent, len(cfg.nodePIDs)), phaseReport(costs[1], "drain", rep.Received, len(cfg.nodePIDs)),
			phaseReport(costs[0].Plus(costs[1]), "send+drain", rep.Received, len(cfg.nodePIDs))}
	}
	for _, p := range rep.Phases {
		rep.ForeignLoad = rep.ForeignLoad || (p.CPU != nil && p.CPU.ForeignLoad)
	}
	return rep, nil
}

// shape says how the run's messages travel, for the report.
func shape(cfg config) string {
	ack := "acked with a plain Ack, settled when the stream is empty (every ack committed and applied)"
	if cfg.ack == "double" {
		ack = fmt.Sprintf("each acked with DoubleAck, at most %d awaiting the answer per consumer", cfg.batch)
	}
	return fmt.Sprintf("window of %d asynchronous publishes awaiting their PubAck over %d connections, a new one as each is answered; "+
		"%d consumers on their own connections taking messages with Consume (at most %d buffered each, %d awaiting acks in all), %s",
		cfg.inflight, cfg.producers, cfg.consumers, cfg.batch, cfg.consumers*cfg.batch, ack)
}

func printReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "%s, stream %s: %s workload, %d replicas, %d producers, %d consumers, %d in flight, %d-byte messages",
		r.Broker, r.Stream, r.Workload, r.Replicas, r.Producers, r.Consumers, r.InFlight, r.MessageBytes)
	if r.WarmupMessages > 0 {
		fmt.Fprintf(w, ", after a warm-up of %d", r.WarmupMessages)
	}
	fmt.Fprintf(w, "\nshape:           %s\n", r.Shape)
	fmt.Fprintf(w, "send:            %9d msgs in %6.2fs  %9.0f msgs/s  %7.2f MB/s  (%d errors %v)\n", r.Sent, r.SendSeconds, r.SendPerSecond, r.SendMBPerSecond, r.SendErrors, r.SendErrorSamples)
	fmt.Fprintf(w, "receive+ack:     %9d msgs in %6.2fs  %9.0f msgs/s  (%d delivered again, %d errors %v)\n", r.Received, r.ReceiveSeconds, r.RecvPerSecond, r.Redelivered, r.ReceiveErrors, r.ReceiveErrorSamples)
	if r.Unsettled > 0 {
		fmt.Fprintf(w, "UNSETTLED:       %d messages still in the stream when the wait for the acks gave up\n", r.Unsettled)
	}
	fmt.Fprintf(w, "settled:         the stream was empty %.1f ms after the last receive\n", r.SettleMs)
	fmt.Fprintf(w, "backlog:         at most %d messages sent and not yet received\n", r.MaxBacklog)
	for _, l := range []struct {
		name string
		l    LatencyReport
	}{{"send-ack", r.SendLatency}, {"end-to-end", r.EndToEnd}} {
		fmt.Fprintf(w, "%-16s p50 %8.2f ms  p90 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", l.name+":", l.l.P50, l.l.P90, l.l.P99, l.l.Max)
	}
	for _, p := range r.Phases {
		line := "CPU not measured: " + p.CPUUnavailable
		if c := p.CPU; c != nil {
			line = fmt.Sprintf("CPU %.1f µs/msg (client %.2fs, %d servers %.2fs), machine %.1f µs/msg, foreign %.2f cores, steal %.2f cores",
				c.MicrosPerMessage, c.ClientSeconds, c.NodeProcesses, c.NodeSeconds, c.MachineMicrosPerMessage, c.ForeignCores, c.StealCores)
		}
		fmt.Fprintf(w, "%-16s %d msgs in %.2fs: %s\n", "cost, "+p.Name+":", p.Messages, p.Seconds, line)
	}
	if r.ForeignLoad {
		fmt.Fprintln(w, "FOREIGN LOAD: other work used the machine during the run (see foreign cores); the figures are of a shared machine")
	}
}

// errorReason names a failed call's kind for the report.
func errorReason(err error) string {
	switch {
	case err == nil:
		return ""
	case strings.Contains(err.Error(), "timeout"), strings.Contains(err.Error(), "deadline"):
		return "TIMEOUT"
	case strings.Contains(err.Error(), "no responders"):
		return "NO_RESPONDERS"
	}
	return "OTHER"
}
