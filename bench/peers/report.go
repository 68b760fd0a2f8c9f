package main

import (
	"sync"

	"github.com/raftbus/raftbus/internal/benchmeter"
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
	InFlight            int               `json:"inFlight"`
	MessageBytes        int               `json:"messageBytes"`
	Replicas            int               `json:"replicas"`
	ReceiveBatch        int               `json:"receiveBatch"`
	AckMode             string            `json:"ackMode"`
	Shape               string            `json:"shape"`
	WarmupMessages      int64             `json:"warmupMessages"`
	Sent                int64             `json:"sent"`
	SendErrors          int64             `json:"sendErrors"`
	SendErrorReasons    map[string]int64  `json:"sendErrorReasons,omitempty"`
	SendErrorSamples    map[string]string `json:"sendErrorSamples,omitempty"`
	ReceiveErrors       int64             `json:"receiveErrors"`
	ReceiveErrorReasons map[string]int64  `json:"receiveErrorReasons,omitempty"`
	ReceiveErrorSamples map[string]string `json:"receiveErrorSamples,omitempty"`
	Received            int64             `json:"received"`
	Redelivered         int64             `json:"redelivered"`
	MaxBacklog          int64             `json:"maxBacklog"`
	SendSeconds         float64           `json:"sendSeconds"`
	ReceiveSeconds      float64           `json:"receiveSeconds"`
	SettleMs            float64           `json:"settleMsAfterLastReceive"`
	Unsettled           uint64            `json:"unsettled"`
	SendPerSecond       float64           `json:"sendMsgsPerSecond"`
	RecvPerSecond       float64           `json:"receiveSettleMsgsPerSecond"`
	SendMBPerSecond     float64           `json:"sendMbPerSecond"`
	SendLatency         LatencyReport     `json:"sendAckLatency"`
	EndToEnd            LatencyReport     `json:"endToEndLatency"`
	Phases              []PhaseReport     `json:"phases"`
	ForeignLoad         bool              `json:"foreignLoad"`
}

// LatencyReport and CPUReport are those of `raftbus bench`.
type (
	LatencyReport = benchmeter.LatencyReport
	CPUReport     = benchmeter.CPUReport
)

// PhaseReport is what one phase cost.
type PhaseReport struct {
	Name           string     `json:"name"`
	Seconds        float64    `json:"seconds"`
	Messages       int64      `json:"messages"`
	CPU            *CPUReport `json:"cpu,omitempty"`
	CPUUnavailable string     `json:"cpuUnavailable,omitempty"`
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
