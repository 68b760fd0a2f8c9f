// Package benchmeter measures what a benchmark run costs and how long its
// calls take, the same way for `raftbus bench` and for the harness that
// drives other brokers (bench/peers): CPU time of processes and of the
// whole machine from /proc, the foreign load (what other work used the
// machine meanwhile), and latency percentiles.
package benchmeter
