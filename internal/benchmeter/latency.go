package benchmeter

import (
	"slices"
	"sync"
	"time"
)

// LatencyReport summarises a latency distribution, in milliseconds.
type LatencyReport struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
}

// Latencies collects durations from many goroutines.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Report summarises what was recorded.
func (l *Latencies) Report() LatencyReport {
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
