package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/benchmeter"
)

// EntitiesReport is what a create or delete run measured (the --output
// json form).
type EntitiesReport struct {
	Workload   string  `json:"workload"`
	Prefix     string  `json:"prefix"`
	Queues     int64   `json:"queues"`
	Partitions int     `json:"partitions"`
	Clients    int     `json:"clients"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"perSecond"`
	// Latency is that of each CreateQueue (or DeleteQueue) call.
	Latency benchmeter.LatencyReport `json:"latency"`
	// FirstSend is that of the send made to each queue as soon as its
	// create returned (create runs only).
	FirstSend *benchmeter.LatencyReport `json:"firstSend,omitempty"`
	Errors    int64                     `json:"errors"`
	// ErrorsByReason counts the errors by reason, each with the first
	// error's message.
	ErrorsByReason []ErrorCount `json:"errorsByReason,omitempty"`
}

// ErrorCount is how many calls failed for one reason.
type ErrorCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
	First  string `json:"first"`
}

// queueName is the name of the i-th queue of a create or delete run.
func queueName(prefix string, i int64) string { return fmt.Sprintf("%s-%06d", prefix, i) }

// benchEntities creates (and sends one message to), sends one message to
// (send-each) or deletes the queues prefix-000000 .. prefix-<count-1>,
// from cfg.producers clients at once, and reports how long each call
// took. send-each shows what the first request to a queue that has gone
// quiet costs, or how long after a node's loss every queue takes sends.
func benchEntities(ctx context.Context, c *client.Client, cfg benchConfig) *EntitiesReport {
	adm := admin.NewFromClient(c)
	var next atomic.Int64
	var calls, sends benchmeter.Latencies
	var errs errorTally
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= cfg.count || ctx.Err() != nil {
					return
				}
				name := queueName(cfg.queue, i)
				t0 := time.Now()
				var err error
				switch cfg.workload {
				case "create":
					_, err = adm.CreateQueue(ctx, name, &admin.QueueProperties{PartitionCount: proto.Uint32(uint32(cfg.partitions))})
				case "send-each":
					err = sendOne(ctx, c, name)
				default:
					err = adm.DeleteQueue(ctx, name)
				}
				if err != nil {
					errs.add(fmt.Errorf("%s %s: %w", cfg.workload, name, err))
					continue
				}
				calls.Add(time.Since(t0))
				if cfg.workload != "create" {
					continue
				}
				t1 := time.Now()
				if err := sendOne(ctx, c, name); err != nil {
					errs.add(fmt.Errorf("first send to %s: %w", name, err))
					continue
				}
				sends.Add(time.Since(t1))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	rep := &EntitiesReport{
		Workload: cfg.workload, Prefix: cfg.queue, Partitions: cfg.partitions, Clients: cfg.producers,
		Seconds: elapsed.Seconds(), Latency: calls.Report(),
	}
	rep.Queues = rep.Latency.Count
	rep.PerSecond = float64(rep.Queues) / rep.Seconds
	if cfg.workload == "create" {
		s := sends.Report()
		rep.FirstSend = &s
	}
	var reasons map[string]int64
	var samples map[string]string
	rep.Errors, reasons, samples = errs.report()
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		rep.ErrorsByReason = append(rep.ErrorsByReason, ErrorCount{Reason: r, Count: reasons[r], First: samples[r]})
	}
	return rep
}

func printEntities(w io.Writer, r *EntitiesReport) {
	verb := map[string]string{"create": "created", "delete": "deleted", "send-each": "sent one message to each of"}[r.Workload]
	fmt.Fprintf(w, "%s %d queues (%s-*) from %d clients in %.2fs: %.1f a second (%d errors)\n",
		verb, r.Queues, r.Prefix, r.Clients, r.Seconds, r.PerSecond, r.Errors)
	for _, e := range r.ErrorsByReason {
		fmt.Fprintf(w, "errors:          %s %d, the first: %s\n", e.Reason, e.Count, e.First)
	}
	line := func(name string, l benchmeter.LatencyReport) {
		fmt.Fprintf(w, "%-16s p50 %8.2f ms  p90 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", name+":", l.P50, l.P90, l.P99, l.Max)
	}
	line(r.Workload, r.Latency)
	if r.FirstSend != nil {
		line("first send", *r.FirstSend)
	}
}

func sendOne(ctx context.Context, c *client.Client, queue string) error {
	s, err := c.NewSender(queue, nil)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	return s.SendMessage(ctx, &client.Message{Body: []byte("first")}, nil)
}
