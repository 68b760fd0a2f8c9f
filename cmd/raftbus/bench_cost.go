package main

import (
	"context"
	"time"

	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/benchmeter"
)

// What a phase of a run cost, measured around it:
//
//   - CPU, from /proc, and the foreign load (see internal/benchmeter).
//   - node log syncs, summed over the nodes (GetClusterInfo's
//     nodes[].log.syncs): every fdatasync of every node's log.
//   - Raft entries: the growth of the commit indexes of the queue's
//     partitions (GetClusterInfo's partitions[].commit_index), so
//     messages per entry says how many messages each replicated entry
//     carried.

// costMeter samples the counters a phase's cost is computed from.
type costMeter struct {
	adm      *admin.Client
	queue    string
	nodePIDs []int
	timeout  time.Duration
}

// costSample is the counters at one moment; a cluster counter that could
// not be read is -1.
type costSample struct {
	cpu                benchmeter.CPUSample
	syncs, raftEntries int64
}

// sampleBefore reads the counters at the start of a phase: the cluster's
// first, so that the work of asking it falls outside the phase's CPU.
func (m *costMeter) sampleBefore(ctx context.Context) costSample {
	var s costSample
	s.syncs, s.raftEntries = m.clusterCounters(ctx)
	s.cpu = benchmeter.SampleCPU(m.nodePIDs)
	return s
}

// sampleAfter reads them at the end of a phase: CPU first.
func (m *costMeter) sampleAfter(ctx context.Context) costSample {
	var s costSample
	s.cpu = benchmeter.SampleCPU(m.nodePIDs)
	s.syncs, s.raftEntries = m.clusterCounters(ctx)
	return s
}

// clusterCounters sums the nodes' log syncs and the commit indexes of the
// queue's partitions; either is -1 when some node or partition did not
// say.
func (m *costMeter) clusterCounters(ctx context.Context) (syncs, entries int64) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	info, err := m.adm.GetClusterInfo(ctx)
	if err != nil {
		return -1, -1
	}
	for _, n := range info.GetNodes() {
		if n.GetLog() == nil {
			syncs = -1
			break
		}
		syncs += int64(n.GetLog().GetSyncs())
	}
	found := false
	for _, p := range info.GetPartitions() {
		if p.GetEntityPath() != m.queue {
			continue
		}
		if p.GetCommitIndex() == 0 {
			return syncs, -1
		}
		found = true
		entries += int64(p.GetCommitIndex())
	}
	if !found {
		entries = -1
	}
	return syncs, entries
}

// costDelta is what a phase used: the difference of two samples (or the
// sum of such differences). A cluster counter not known is -1.
type costDelta struct {
	cpu                benchmeter.CPUDelta
	syncs, raftEntries int64
}

func between(before, after costSample) costDelta {
	d := costDelta{cpu: benchmeter.Between(before.cpu, after.cpu), syncs: -1, raftEntries: -1}
	if before.syncs >= 0 && after.syncs >= 0 {
		d.syncs = after.syncs - before.syncs
	}
	if before.raftEntries >= 0 && after.raftEntries >= 0 {
		d.raftEntries = after.raftEntries - before.raftEntries
	}
	return d
}

func (d costDelta) plus(e costDelta) costDelta {
	known := func(a, b int64) int64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a + b
	}
	return costDelta{cpu: d.cpu.Plus(e.cpu), syncs: known(d.syncs, e.syncs), raftEntries: known(d.raftEntries, e.raftEntries)}
}

// report is the phase's report, per message of messages, for nodes node
// processes.
func (d costDelta) report(name string, messages int64, nodes int) PhaseReport {
	p := PhaseReport{Name: name, Seconds: d.cpu.Seconds, Messages: messages, CPUUnavailable: d.cpu.Err}
	if d.cpu.Err == "" {
		p.CPU = d.cpu.Report(messages, nodes)
	}
	if d.syncs >= 0 {
		p.NodeLogSyncs = ptr(d.syncs)
		if messages > 0 {
			p.SyncsPerMessage = ptr(float64(d.syncs) / float64(messages))
		}
	}
	if d.raftEntries >= 0 {
		p.RaftEntries = ptr(d.raftEntries)
		if d.raftEntries > 0 {
			p.MessagesPerEntry = ptr(float64(messages) / float64(d.raftEntries))
		}
	}
	return p
}

func ptr[T any](v T) *T { return &v }
