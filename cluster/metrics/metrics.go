package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is one node's metrics, in a registry of its own: nodes that share
// a process (tests) keep theirs apart.
type Metrics struct {
	registry *prometheus.Registry

	requestSeconds *prometheus.HistogramVec
	requestErrors  *prometheus.CounterVec
	commitSeconds  prometheus.Histogram
	applySeconds   prometheus.Histogram
	fsyncSeconds   prometheus.Histogram
}

// latencyBuckets span a fsync on a fast disk to a long poll: 100 µs to
// about 26 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 19)

// New returns the metrics of a node whose state source describes: the
// figures read at scrape time come from it.
func New(source Source) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "raftbus_request_duration_seconds",
			Help:    "Time this node took to answer a client's call, forwarding included, by API method.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftbus_request_errors_total",
			Help: "Client calls this node answered with an error, by API method and error reason.",
		}, []string{"method", "reason"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "raftbus_raft_commit_duration_seconds",
			Help:    "Time from a partition leader proposing a log entry to its being committed on a quorum and applied.",
			Buckets: latencyBuckets,
		}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "raftbus_raft_apply_duration_seconds",
			Help:    "Time a partition's state machine took to apply one batch of log entries.",
			Buckets: latencyBuckets,
		}),
		fsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "raftbus_log_fsync_duration_seconds",
			Help:    "Time the node log took to make one batch of appends durable (fdatasync).",
			Buckets: latencyBuckets,
		}),
	}
	m.registry.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		m.requestSeconds, m.requestErrors, m.commitSeconds, m.applySeconds, m.fsyncSeconds,
		stateCollector{source},
	)
	return m
}

// Gatherer is what an HTTP handler serves.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }

// Committed records a partition leader's commit latency (partition.Observer).
func (m *Metrics) Committed(d time.Duration) { m.commitSeconds.Observe(d.Seconds()) }

// Applied records one state machine batch (partition.Observer).
func (m *Metrics) Applied(_ int, d time.Duration) { m.applySeconds.Observe(d.Seconds()) }

// Synced records one fsync of the node log (raftlog.Options.OnSync).
func (m *Metrics) Synced(d time.Duration) { m.fsyncSeconds.Observe(d.Seconds()) }
