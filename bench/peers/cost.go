package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// CPU is measured as `raftbus bench` measures it (cmd/raftbus/bench_cost.go;
// this module does not import the broker's): utime+stime of this process
// and of the --node-pids processes from /proc/<pid>/stat, the machine's
// busy time (user, nice, system, irq, softirq) from /proc/stat, and as
// foreign load what the machine was busy with beyond those processes.

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/<pid>/stat.
const clockTicks = 100

// foreignLoadShare is the foreign load, as a share of the machine's
// cores, from which a run is flagged.
const foreignLoadShare = 0.05

// cpuSample is the CPU counters at one moment.
type cpuSample struct {
	at                       time.Time
	self, nodes, busy, steal int64
	err                      string
}

func sampleCPU(pids []int) cpuSample {
	s := cpuSample{at: time.Now()}
	var err error
	if s.self, err = processTicks("self"); err == nil {
		for _, pid := range pids {
			var t int64
			if t, err = processTicks(strconv.Itoa(pid)); err != nil {
				break
			}
			s.nodes += t
		}
	}
	if err == nil {
		s.busy, s.steal, err = machineTicks()
	}
	if err != nil {
		s.err = err.Error()
	}
	return s
}

// costDelta is the CPU a phase used.
type costDelta struct {
	seconds                  float64
	self, nodes, busy, steal int64
	err                      string
}

func between(before, after cpuSample) costDelta {
	return costDelta{seconds: after.at.Sub(before.at).Seconds(), self: after.self - before.self, nodes: after.nodes - before.nodes,
		busy: after.busy - before.busy, steal: after.steal - before.steal, err: before.err + after.err}
}

func (d costDelta) plus(e costDelta) costDelta {
	return costDelta{seconds: d.seconds + e.seconds, self: d.self + e.self, nodes: d.nodes + e.nodes,
		busy: d.busy + e.busy, steal: d.steal + e.steal, err: d.err + e.err}
}

func (d costDelta) report(name string, messages int64, nodeProcesses int) PhaseReport {
	p := PhaseReport{Name: name, Seconds: d.seconds, Messages: messages, CPUUnavailable: d.err}
	if d.err != "" {
		return p
	}
	sec := func(ticks int64) float64 { return float64(ticks) / clockTicks }
	c := &CPUReport{ClientSeconds: sec(d.self), NodeSeconds: sec(d.nodes), NodeProcesses: nodeProcesses, MachineBusySeconds: sec(d.busy)}
	if messages > 0 {
		c.MicrosPerMessage = (c.ClientSeconds + c.NodeSeconds) * 1e6 / float64(messages)
		c.MachineMicrosPerMessage = c.MachineBusySeconds * 1e6 / float64(messages)
	}
	if d.seconds > 0 {
		c.ForeignCores = max(0, sec(d.busy-d.self-d.nodes)/d.seconds)
		c.StealCores = sec(d.steal) / d.seconds
	}
	c.ForeignLoad = c.ForeignCores > foreignLoadShare*float64(runtime.NumCPU())
	p.CPU = c
	return p
}

// processTicks is utime+stime of a process, from /proc/<pid>/stat.
func processTicks(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	stat := string(b)
	// Fields after the parenthesised command name start with the state
	// (field 3); utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%s/stat", pid)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%s/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%s/stat", pid)
	}
	return u + s, nil
}

// machineTicks is the time all CPUs were busy, and stolen by the
// hypervisor, from /proc/stat.
func machineTicks() (busy, steal int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat")
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("unexpected /proc/stat")
		}
	}
	return v[0] + v[1] + v[2] + v[5] + v[6], v[7], nil
}

func parsePIDs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var pids []int
	for _, f := range strings.Split(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("--node-pids: %q is not a process id", f)
		}
		if _, err := processTicks(strconv.Itoa(pid)); err != nil {
			return nil, fmt.Errorf("--node-pids: process %d: %v", pid, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
