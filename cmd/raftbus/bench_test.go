package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/internal/benchmeter"
	"github.com/raftbus/raftbus/test/procs"
)

func TestBenchGoesOnPastErrorsARetryCanGetPast(t *testing.T) {
	var tally errorTally
	unknown := &client.Error{Code: client.CodeOutcomeUnknown, Message: "leadership lost while committing log", Retryable: true}
	invalid := &client.Error{Code: client.CodeInvalidArgument, Message: "bad"}
	live, done := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	if err := retried(live, unknown, tally.add); err != nil {
		t.Fatalf("an unknown outcome ended the consumer: %v", err)
	}
	if err := retried(live, invalid, tally.add); !errors.Is(err, invalid) {
		t.Fatalf("INVALID_ARGUMENT: %v, want it returned", err)
	}
	if err := retried(done, invalid, tally.add); err != nil {
		t.Fatalf("an error after the run: %v, want it ignored", err)
	}
	n, reasons, samples := tally.report()
	if n != 1 || reasons["OUTCOME_UNKNOWN"] != 1 || samples["OUTCOME_UNKNOWN"] != unknown.Error() {
		t.Fatalf("tally %d %v %v, want the one unknown outcome", n, reasons, samples)
	}
}

func TestBenchPhasedSendsEverythingThenDrainsItAndSaysWhatItCost(t *testing.T) {
	cl := procs.Start(t, raftbusd, 1)
	c := cli{t: t, server: cl.Nodes[0].Addr}
	c.ok("queue", "create", "phased", "--partitions", "2")
	var rep BenchReport
	c.json(&rep, "bench", "--workload", "phased", "--queue", "phased", "--count", "1000", "--warmup", "100",
		"--inflight", "16", "--producers", "2", "--consumers", "2", "--node-pids", strconv.Itoa(cl.Nodes[0].PID()))
	if rep.Workload != "phased" || rep.WarmupMessages != 100 || rep.Sent != 1000 || rep.Received != 1000 || rep.SendLatency.Count != 1000 {
		t.Fatalf("phased run: %+v", rep)
	}
	// Nothing is received while the producers send.
	if rep.MaxBacklog != 1000 {
		t.Fatalf("backlog at most %d, want all 1000 sent before the drain", rep.MaxBacklog)
	}
	if !strings.Contains(rep.Shape, "window of 16 sends") || rep.ReceiveBatch != 100 {
		t.Fatalf("shape %q, receive batch %d", rep.Shape, rep.ReceiveBatch)
	}
	var names []string
	for _, p := range rep.Phases {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"send", "drain", "send+drain"}) {
		t.Fatalf("phases %v", names)
	}
	send, drain, both := rep.Phases[0], rep.Phases[1], rep.Phases[2]
	for _, p := range rep.Phases {
		// 1000 messages are sent and settled in far fewer entries than
		// messages, and every entry is synced at least once.
		if p.RaftEntries == nil || *p.RaftEntries < 1 || p.MessagesPerEntry == nil || *p.MessagesPerEntry <= 0 ||
			p.NodeLogSyncs == nil || *p.NodeLogSyncs < 1 || p.SyncsPerMessage == nil {
			t.Fatalf("phase %s: entries and syncs not reported: %+v", p.Name, p)
		}
		if runtime.GOOS == "linux" && (p.CPU == nil || p.CPU.NodeProcesses != 1) {
			t.Fatalf("phase %s: CPU not measured: %+v (%s)", p.Name, p.CPU, p.CPUUnavailable)
		}
		// A message of 1 KiB is decoded, stored and answered on the node
		// and encoded by the client: each allocates more than its body.
		if p.NodeAllocatedBytesPerMessage == nil || *p.NodeAllocatedBytesPerMessage < 1024 || *p.NodeAllocationsPerMessage < 1 ||
			p.ClientAllocatedBytesPerMessage == nil || *p.ClientAllocatedBytesPerMessage < 1024 || *p.ClientAllocationsPerMessage < 1 {
			t.Fatalf("phase %s: allocation not reported: %+v", p.Name, p)
		}
	}
	if send.Messages != 1000 || drain.Messages != 1000 || both.Messages != 1000 ||
		*both.RaftEntries != *send.RaftEntries+*drain.RaftEntries || *both.NodeLogSyncs != *send.NodeLogSyncs+*drain.NodeLogSyncs {
		t.Fatalf("send+drain is not the sum of its phases: %+v", rep.Phases)
	}
	if c := both.CPU; c != nil && (c.ClientSeconds+c.NodeSeconds <= 0 || c.MicrosPerMessage <= 0 || c.MachineBusySeconds < c.ClientSeconds+c.NodeSeconds-0.05) {
		t.Fatalf("CPU of the run: %+v", c)
	}
	// The warm-up's messages were drained too, and none counted.
	var st struct {
		Runtime map[string]map[string]any `json:"runtime"`
	}
	c.json(&st, "status")
	if n := st.Runtime["phased"]["activeMessageCount"]; n != nil && n != "0" {
		t.Fatalf("%v messages left in the queue", n)
	}

	var mixed BenchReport
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	c.json(&mixed, "bench", "--count", "500", "--inflight", "16", "--producers", "2", "--consumers", "2", "--cpuprofile", prof)
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote no gzipped profile (%d bytes, %v)", len(b), err)
	}
	if mixed.Workload != "mixed" || mixed.Received != 500 || len(mixed.Phases) != 1 || mixed.Phases[0].Name != "mixed" ||
		mixed.Phases[0].Messages != 500 || mixed.MaxBacklog < 1 || mixed.MaxBacklog > 500 {
		t.Fatalf("mixed run: %+v", mixed)
	}
	if cpu := mixed.Phases[0].CPU; runtime.GOOS == "linux" && (cpu == nil || cpu.NodeProcesses != 0) {
		t.Fatalf("mixed run without --node-pids: CPU %+v", cpu)
	}
	if out := c.ok("bench", "--workload", "phased", "--count", "50", "--inflight", "4"); !strings.Contains(out, "cost, send+drain:") || !strings.Contains(out, "nodes not counted") {
		t.Fatalf("text report:\n%s", out)
	}
	c.fails(2, "--workload", "bench", "--workload", "sideways")
	c.fails(2, "--node-pids", "bench", "--node-pids", "n1")
	c.fails(2, "--node-pids", "bench", "--node-pids", "999999999")
}

func TestBenchKeepsUnknownCountersUnknownInASumOfPhases(t *testing.T) {
	d := costDelta{cpu: benchmeter.CPUDelta{Seconds: 1}, syncs: 5, raftEntries: -1}.plus(costDelta{cpu: benchmeter.CPUDelta{Seconds: 2}, syncs: 7, raftEntries: 3})
	if d.cpu.Seconds != 3 || d.syncs != 12 || d.raftEntries != -1 {
		t.Fatalf("sum %+v", d)
	}
	if p := d.report("both", 6, 0); p.RaftEntries != nil || *p.SyncsPerMessage != 2 {
		t.Fatalf("report %+v", p)
	}
}

func TestBenchEndToEndEndsAtReceiptNotAtSettlement(t *testing.T) {
	r := newRound(nil, benchConfig{}, "run-", nil)
	enqueued := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	receivedAt := enqueued.Add(3 * time.Millisecond)
	r.got([]*client.ReceivedMessage{
		{MessageID: "run-1", EnqueuedTime: enqueued},
		{MessageID: "other-1", EnqueuedTime: enqueued}, // an earlier round's
	}, receivedAt)
	// got runs once the batch is settled, long after receivedAt; the
	// figure must not include the settling.
	if rep := r.e2eLat.Report(); rep.Count != 1 || rep.Max != 3 {
		t.Fatalf("end-to-end %+v, want one message at 3 ms", rep)
	}
	if r.received.Load() != 1 || r.redelivered.Load() != 1 {
		t.Fatalf("received %d, redelivered %d, want 1 and 1", r.received.Load(), r.redelivered.Load())
	}
}

func TestBenchFillLeavesTheBacklogForALaterDrain(t *testing.T) {
	cl := procs.Start(t, raftbusd, 1)
	c := cli{t: t, server: cl.Nodes[0].Addr}
	c.ok("queue", "create", "backlog")
	var fill BenchReport
	c.json(&fill, "bench", "--workload", "fill", "--queue", "backlog", "--count", "300", "--inflight", "8", "--producers", "2")
	if fill.Sent != 300 || fill.Received != 0 || len(fill.Phases) != 1 || fill.Phases[0].Name != "fill" || fill.Phases[0].Messages != 300 {
		t.Fatalf("fill: %+v", fill)
	}
	var st struct {
		Runtime map[string]map[string]any `json:"runtime"`
	}
	c.json(&st, "status")
	if n := st.Runtime["backlog"]["activeMessageCount"]; n != "300" {
		t.Fatalf("%v messages in the queue after the fill, want 300", n)
	}
	var drain BenchReport
	c.json(&drain, "bench", "--workload", "drain", "--queue", "backlog", "--count", "300", "--consumers", "2", "--mode", "receive-and-delete")
	if drain.Received != 300 || len(drain.Phases) != 1 || drain.Phases[0].Name != "drain" || drain.Phases[0].Messages != 300 || drain.RecvPerSecond <= 0 {
		t.Fatalf("drain: %+v", drain)
	}
	c.json(&st, "status")
	if n := st.Runtime["backlog"]["activeMessageCount"]; n != nil && n != "0" {
		t.Fatalf("%v messages left after the drain", n)
	}
	c.fails(2, "--queue and --count", "bench", "--workload", "drain", "--count", "5")
	c.fails(2, "--queue and --count", "bench", "--workload", "fill", "--queue", "backlog")
}

func TestBenchCreatesQueuesThatTakeASendAndDeletesThem(t *testing.T) {
	cl := procs.Start(t, raftbusd, 1)
	c := cli{t: t, server: cl.Nodes[0].Addr}
	var created EntitiesReport
	c.json(&created, "bench", "--workload", "create", "--queue", "tenant", "--count", "6", "--producers", "3", "--partitions", "2")
	if created.Queues != 6 || created.Errors != 0 || created.FirstSend == nil || created.FirstSend.Count != 6 || created.Latency.P50 <= 0 {
		t.Fatalf("create: %+v", created)
	}
	var st struct {
		Runtime map[string]map[string]any `json:"runtime"`
	}
	c.json(&st, "status")
	for i := range 6 {
		name := fmt.Sprintf("tenant-%06d", i)
		if n := st.Runtime[name]["activeMessageCount"]; n != "1" {
			t.Errorf("%s holds %v messages after the create's send, want 1", name, n)
		}
	}
	var deleted EntitiesReport
	c.json(&deleted, "bench", "--workload", "delete", "--queue", "tenant", "--count", "6", "--producers", "3")
	if deleted.Queues != 6 || deleted.Errors != 0 || deleted.FirstSend != nil {
		t.Fatalf("delete: %+v", deleted)
	}
	if out := c.ok("queue", "list"); strings.Contains(out, "tenant-") {
		t.Fatalf("queues left after the delete:\n%s", out)
	}
	// A second delete finds nothing: every call fails, and says why.
	c.json(&deleted, "bench", "--workload", "delete", "--queue", "tenant", "--count", "2", "--producers", "1")
	if deleted.Queues != 0 || deleted.Errors != 2 || len(deleted.ErrorsByReason) != 1 || deleted.ErrorsByReason[0].Reason != "NOT_FOUND" {
		t.Fatalf("delete of deleted queues: %+v", deleted)
	}
	c.fails(2, "--queue and --count", "bench", "--workload", "create", "--count", "5")
}
