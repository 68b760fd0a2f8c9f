package main

import (
	"slices"
	"sync"
	"time"
)

// Report is what a run measured. Its JSON fields are those of `raftbus
// bench --output json`, so that scripts read both alike; the nodes' log
// syncs and Raft entries, which NATS does not count, are left out.
type Report struct {
	Broker              string            `json:"broker"`
	Stream              string            `json:"stream"`
	Workload            string            `json:"workload"`
	Producers           int               `json:"producers"`
	Consumers           int               `json:"consumers"`
	InFlight            int               `json:"in_flight"`
	MessageBytes        int               `json:"message_bytes"`
	Replicas            int               `json:"replicas"`
	ReceiveBatch        int               `json:"receive_batch"`
	Shape               string            `json:"shape"`
	WarmupMessages      int64             `json:"warmup_messages"`
	Sent                int64             `json:"sent"`
	SendErrors          int64             `json:"send_errors"`
	SendErrorReasons    map[string]int64  `json:"send_error_reasons,omitempty"`
	SendErrorSamples    map[string]string `json:"send_error_samples,omitempty"`
	ReceiveErrors       int64             `json:"receive_errors"`
	ReceiveErrorReasons map[string]int64  `json:"receive_error_reasons,omitempty"`
	ReceiveErrorSamples map[string]string `json:"receive_error_samples,omitempty"`
	Received            int64             `json:"received"`
	Redelivered         int64             `json:"redelivered"`
	MaxBacklog          int64             `json:"max_backlog"`
	SendSeconds         float64           `json:"send_seconds"`
	ReceiveSeconds      float64           `json:"receive_seconds"`
	SendPerSecond       float64           `json:"send_msgs_per_second"`
	RecvPerSecond       float64           `json:"receive_settle_msgs_per_second"`
	SendMBPerSecond     float64           `json:"send_mb_per_second"`
	SendLatency         LatencyReport     `json:"send_ack_latency"`
	EndToEnd            LatencyReport     `json:"end_to_end_latency"`
	Phases              []PhaseReport     `json:"phases"`
	ForeignLoad         bool              `json:"foreign_load"`
}

// LatencyReport summarises a latency distribution, in milliseconds.
type LatencyReport struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// PhaseReport is what one phase cost.
type PhaseReport struct {
	Name           string     `json:"name"`
	Seconds        float64    `json:"seconds"`
	Messages       int64      `json:"messages"`
	CPU            *CPUReport `json:"cpu,omitempty"`
	CPUUnavailable string     `json:"cpu_unavailable,omitempty"`
}

// CPUReport is the CPU time a phase used; NodeSeconds is of the
// nats-server processes.
type CPUReport struct {
	ClientSeconds           float64 `json:"client_seconds"`
	NodeSeconds             float64 `json:"node_seconds"`
	NodeProcesses           int     `json:"node_processes"`
	MicrosPerMessage        float64 `json:"us_per_message"`
	MachineBusySeconds      float64 `json:"machine_busy_seconds"`
	MachineMicrosPerMessage float64 `json:"machine_us_per_message"`
	ForeignCores            float64 `json:"foreign_cores"`
	StealCores              float64 `json:"steal_cores"`
	ForeignLoad             bool    `json:"foreign_load"`
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
