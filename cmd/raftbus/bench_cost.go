package main

import (
	"context"
	"runtime/metrics"
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
//   - heap allocation, bytes and objects: the nodes' summed
//     (GetClusterInfo's nodes[].runtime) and this process's own (Go's
//     runtime/metrics), freed or not: the garbage a message leaves.

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
	nodeAlloc          allocCount // unknown when some node did not say
	clientAlloc        allocCount
}

// allocCount is heap allocation since a process started (or over a
// phase); bytes is -1 when it is not known.
type allocCount struct{ bytes, objects int64 }

var unknownAlloc = allocCount{bytes: -1}

// add is a + sign*b, unknown when either is.
func (a allocCount) add(sign int64, b allocCount) allocCount {
	if a.bytes < 0 || b.bytes < 0 {
		return unknownAlloc
	}
	return allocCount{a.bytes + sign*b.bytes, a.objects + sign*b.objects}
}

// clientAllocation reads this process's allocation counters.
func clientAllocation() allocCount {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return allocCount{bytes: int64(s[0].Value.Uint64()), objects: int64(s[1].Value.Uint64())}
}

// sampleBefore reads the counters at the start of a phase: the cluster's
// first, so that the work of asking it falls outside the phase's CPU.
func (m *costMeter) sampleBefore(ctx context.Context) costSample {
	var s costSample
	s.syncs, s.raftEntries, s.nodeAlloc = m.clusterCounters(ctx)
	s.cpu = benchmeter.SampleCPU(m.nodePIDs)
	s.clientAlloc = clientAllocation()
	return s
}

// sampleAfter reads them at the end of a phase: CPU first.
func (m *costMeter) sampleAfter(ctx context.Context) costSample {
	var s costSample
	s.clientAlloc = clientAllocation()
	s.cpu = benchmeter.SampleCPU(m.nodePIDs)
	s.syncs, s.raftEntries, s.nodeAlloc = m.clusterCounters(ctx)
	return s
}

// clusterCounters sums the nodes' log syncs and allocation and the
// commit indexes of the queue's partitions; each is -1 when some node or
// partition did not say.
func (m *costMeter) clusterCounters(ctx context.Context) (syncs, entries int64, alloc allocCount) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	info, err := m.adm.GetClusterInfo(ctx)
	if err != nil {
		return -1, -1, unknownAlloc
	}
	for _, n := range info.GetNodes() {
		if n.GetLog() == nil {
			syncs = -1
			break
		}
		syncs += int64(n.GetLog().GetSyncs())
	}
	for _, n := range info.GetNodes() {
		if n.GetRuntime() == nil {
			alloc = unknownAlloc
			break
		}
		alloc.bytes += int64(n.GetRuntime().GetAllocatedBytes())
		alloc.objects += int64(n.GetRuntime().GetAllocations())
	}
	found := false
	for _, p := range info.GetPartitions() {
		if p.GetEntityPath() != m.queue {
			continue
		}
		if p.GetCommitIndex() == 0 {
			return syncs, -1, alloc
		}
		found = true
		entries += int64(p.GetCommitIndex())
	}
	if !found {
		entries = -1
	}
	return syncs, entries, alloc
}

// costDelta is what a phase used: the difference of two samples (or the
// sum of such differences). A cluster counter not known is -1.
type costDelta struct {
	cpu                    benchmeter.CPUDelta
	syncs, raftEntries     int64
	nodeAlloc, clientAlloc allocCount
}

func between(before, after costSample) costDelta {
	d := costDelta{cpu: benchmeter.Between(before.cpu, after.cpu), syncs: -1, raftEntries: -1,
		nodeAlloc: after.nodeAlloc.add(-1, before.nodeAlloc), clientAlloc: after.clientAlloc.add(-1, before.clientAlloc)}
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
	return costDelta{cpu: d.cpu.Plus(e.cpu), syncs: known(d.syncs, e.syncs), raftEntries: known(d.raftEntries, e.raftEntries),
		nodeAlloc: d.nodeAlloc.add(1, e.nodeAlloc), clientAlloc: d.clientAlloc.add(1, e.clientAlloc)}
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
	if messages > 0 {
		if d.nodeAlloc.bytes >= 0 {
			p.NodeAllocatedBytesPerMessage = ptr(float64(d.nodeAlloc.bytes) / float64(messages))
			p.NodeAllocationsPerMessage = ptr(float64(d.nodeAlloc.objects) / float64(messages))
		}
		p.ClientAllocatedBytesPerMessage = ptr(float64(d.clientAlloc.bytes) / float64(messages))
		p.ClientAllocationsPerMessage = ptr(float64(d.clientAlloc.objects) / float64(messages))
	}
	return p
}

func ptr[T any](v T) *T { return &v }
