package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/raftbus/raftbus/client/admin"
)

// What a phase of a run cost, measured around it:
//
//   - CPU, from /proc: utime+stime of this process (/proc/self/stat) and
//     of the node processes named by --node-pids (/proc/<pid>/stat), and
//     the whole machine's busy time (/proc/stat: user, nice, system, irq
//     and softirq; not idle, iowait or steal). What the machine was busy
//     with beyond those processes is foreign load: other work sharing the
//     machine, which slows the run down. (With tick-based accounting, as
//     on most kernels, a tick spent in an interrupt is charged to the
//     process it interrupted, so the network work of the run's own
//     processes is theirs, not foreign.)
//   - node log syncs, summed over the nodes (GetClusterInfo's
//     nodes[].log.syncs): every fdatasync of every node's log.
//   - Raft entries: the growth of the commit indexes of the queue's
//     partitions (GetClusterInfo's partitions[].commit_index), so
//     messages per entry says how many messages each replicated entry
//     carried.

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// foreignLoadShare is the foreign load, as a share of the machine's
// cores, from which a run is flagged.
const foreignLoadShare = 0.05

// costMeter samples the counters a phase's cost is computed from.
type costMeter struct {
	adm      *admin.Client
	queue    string
	nodePIDs []int
	timeout  time.Duration
}

// costSample is the counters at one moment; a counter that could not be
// read is -1, with the reason in cpuErr for CPU.
type costSample struct {
	at                 time.Time
	selfTicks          int64
	nodeTicks          int64
	busyTicks          int64
	stealTicks         int64
	cpuErr             string
	syncs, raftEntries int64
}

// sampleBefore reads the counters at the start of a phase: the cluster's
// first, so that the work of asking it falls outside the phase's CPU.
func (m *costMeter) sampleBefore(ctx context.Context) costSample {
	var s costSample
	s.syncs, s.raftEntries = m.clusterCounters(ctx)
	s.readCPU(m.nodePIDs)
	s.at = time.Now()
	return s
}

// sampleAfter reads them at the end of a phase: CPU first.
func (m *costMeter) sampleAfter(ctx context.Context) costSample {
	var s costSample
	s.at = time.Now()
	s.readCPU(m.nodePIDs)
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

func (s *costSample) readCPU(pids []int) {
	var err error
	if s.selfTicks, err = processTicks("self"); err == nil {
		for _, pid := range pids {
			var t int64
			if t, err = processTicks(strconv.Itoa(pid)); err != nil {
				break
			}
			s.nodeTicks += t
		}
	}
	if err == nil {
		s.busyTicks, s.stealTicks, err = machineTicks()
	}
	if err != nil {
		s.cpuErr = err.Error()
	}
}

// processTicks is utime+stime of a process (all its threads, those ended
// included), from /proc/<pid>/stat.
func processTicks(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcessTicks(string(b))
}

func parseProcessTicks(stat string) (int64, error) {
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after it start with the state (field 3), and utime and
	// stime are fields 14 and 15.
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:])
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/<pid>/stat: %.80q", stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/<pid>/stat: %.80q", stat)
	}
	return u + s, nil
}

// machineTicks is the time all CPUs were busy, and stolen by the
// hypervisor, from the first line of /proc/stat.
func machineTicks() (busy, steal int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseMachineTicks(string(b))
}

func parseMachineTicks(stat string) (busy, steal int64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat: %.80q", line)
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("unexpected /proc/stat: %.80q", line)
		}
	}
	return v[0] + v[1] + v[2] + v[5] + v[6], v[7], nil
}

// costDelta is what a phase used: the difference of two samples (or the
// sum of such differences). A counter not known is -1.
type costDelta struct {
	seconds                  float64
	self, nodes, busy, steal int64
	cpuErr                   string
	syncs, raftEntries       int64
}

func between(before, after costSample) costDelta {
	d := costDelta{seconds: after.at.Sub(before.at).Seconds(), syncs: -1, raftEntries: -1}
	d.cpuErr = before.cpuErr + after.cpuErr
	d.self, d.nodes = after.selfTicks-before.selfTicks, after.nodeTicks-before.nodeTicks
	d.busy, d.steal = after.busyTicks-before.busyTicks, after.stealTicks-before.stealTicks
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
	return costDelta{seconds: d.seconds + e.seconds,
		self: d.self + e.self, nodes: d.nodes + e.nodes, busy: d.busy + e.busy, steal: d.steal + e.steal,
		cpuErr: d.cpuErr + e.cpuErr, syncs: known(d.syncs, e.syncs), raftEntries: known(d.raftEntries, e.raftEntries)}
}

// report is the phase's report, per message of messages.
func (d costDelta) report(name string, messages int64) PhaseReport {
	p := PhaseReport{Name: name, Seconds: d.seconds, Messages: messages, CPUUnavailable: d.cpuErr}
	if d.cpuErr == "" {
		p.CPU = cpuReport(messages, d.seconds, d.self, d.nodes, d.busy, d.steal)
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

func cpuReport(messages int64, seconds float64, self, nodes, busy, steal int64) *CPUReport {
	sec := func(ticks int64) float64 { return float64(ticks) / clockTicks }
	c := &CPUReport{ClientSeconds: sec(self), NodeSeconds: sec(nodes), MachineBusySeconds: sec(busy)}
	if messages > 0 {
		c.MicrosPerMessage = (c.ClientSeconds + c.NodeSeconds) * 1e6 / float64(messages)
		c.MachineMicrosPerMessage = c.MachineBusySeconds * 1e6 / float64(messages)
	}
	if seconds > 0 {
		// Sampling the counters at slightly different moments can make
		// the difference a tick or two below zero.
		c.ForeignCores = max(0, sec(busy-self-nodes)/seconds)
		c.StealCores = sec(steal) / seconds
	}
	c.ForeignLoad = c.ForeignCores > foreignLoadShare*float64(runtime.NumCPU())
	return c
}

func ptr[T any](v T) *T { return &v }

// parsePIDs reads --node-pids: process ids separated by commas, each of a
// process this user can read the CPU time of.
func parsePIDs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var pids []int
	for _, f := range strings.Split(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			return nil, usagef("--node-pids: %q is not a process id", f)
		}
		if _, err := processTicks(strconv.Itoa(pid)); err != nil {
			return nil, usagef("--node-pids: process %d: %v", pid, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
