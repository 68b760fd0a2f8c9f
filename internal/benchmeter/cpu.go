package benchmeter

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// CPU is measured from /proc: utime+stime of this process
// (/proc/self/stat) and of the node processes (/proc/<pid>/stat), and the
// whole machine's busy time (/proc/stat: user, nice, system, irq and
// softirq; not idle, iowait or steal). What the machine was busy with
// beyond those processes is foreign load: other work sharing the
// machine, which slows the run down. (With tick-based accounting, as on
// most kernels, a tick spent in an interrupt is charged to the process it
// interrupted, so the network work of the run's own processes is theirs,
// not foreign.)

// ClockTicks is USER_HZ, the unit of /proc/stat and /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const ClockTicks = 100

// ForeignLoadShare is the foreign load, as a share of the machine's
// cores, from which a run is flagged.
const ForeignLoadShare = 0.05

// CPUSample is the CPU counters at one moment, in clock ticks; Err says
// why they could not be read.
type CPUSample struct {
	At                       time.Time
	Self, Nodes, Busy, Steal int64
	Err                      string
}

// SampleCPU reads the counters of this process, of the processes pids
// (summed) and of the machine.
func SampleCPU(pids []int) CPUSample {
	s := CPUSample{At: time.Now()}
	var err error
	if s.Self, err = ProcessTicks("self"); err == nil {
		for _, pid := range pids {
			var t int64
			if t, err = ProcessTicks(strconv.Itoa(pid)); err != nil {
				break
			}
			s.Nodes += t
		}
	}
	if err == nil {
		s.Busy, s.Steal, err = machineTicks()
	}
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

// CPUDelta is the CPU used between two samples (or the sum of such).
type CPUDelta struct {
	Seconds                  float64
	Self, Nodes, Busy, Steal int64
	Err                      string
}

// Between is what was used from before to after.
func Between(before, after CPUSample) CPUDelta {
	return CPUDelta{Seconds: after.At.Sub(before.At).Seconds(), Self: after.Self - before.Self, Nodes: after.Nodes - before.Nodes,
		Busy: after.Busy - before.Busy, Steal: after.Steal - before.Steal, Err: before.Err + after.Err}
}

// Plus is d and e together.
func (d CPUDelta) Plus(e CPUDelta) CPUDelta {
	return CPUDelta{Seconds: d.Seconds + e.Seconds, Self: d.Self + e.Self, Nodes: d.Nodes + e.Nodes,
		Busy: d.Busy + e.Busy, Steal: d.Steal + e.Steal, Err: d.Err + e.Err}
}

// CPUReport is the CPU time a phase used.
type CPUReport struct {
	ClientSeconds float64 `json:"clientSeconds"`
	// NodeSeconds is of the NodeProcesses node processes.
	NodeSeconds        float64 `json:"nodeSeconds"`
	NodeProcesses      int     `json:"nodeProcesses"`
	MicrosPerMessage   float64 `json:"usPerMessage"`
	MachineBusySeconds float64 `json:"machineBusySeconds"`
	// MachineMicrosPerMessage counts whatever ran on the machine.
	MachineMicrosPerMessage float64 `json:"machineUsPerMessage"`
	// ForeignCores is the machine's busy time beyond the client and the
	// nodes, in cores on average; StealCores what the hypervisor took.
	ForeignCores float64 `json:"foreignCores"`
	StealCores   float64 `json:"stealCores"`
	ForeignLoad  bool    `json:"foreignLoad"`
}

// Report is d per message of messages, for nodes node processes.
func (d CPUDelta) Report(messages int64, nodes int) *CPUReport {
	sec := func(ticks int64) float64 { return float64(ticks) / ClockTicks }
	c := &CPUReport{ClientSeconds: sec(d.Self), NodeSeconds: sec(d.Nodes), NodeProcesses: nodes, MachineBusySeconds: sec(d.Busy)}
	if messages > 0 {
		c.MicrosPerMessage = (c.ClientSeconds + c.NodeSeconds) * 1e6 / float64(messages)
		c.MachineMicrosPerMessage = c.MachineBusySeconds * 1e6 / float64(messages)
	}
	if d.Seconds > 0 {
		// Sampling the counters at slightly different moments can make
		// the difference a tick or two below zero.
		c.ForeignCores = max(0, sec(d.Busy-d.Self-d.Nodes)/d.Seconds)
		c.StealCores = sec(d.Steal) / d.Seconds
	}
	c.ForeignLoad = c.ForeignCores > ForeignLoadShare*float64(runtime.NumCPU())
	return c
}

// ProcessTicks is utime+stime of a process (all its threads, those ended
// included), from /proc/<pid>/stat ("self" for this one).
func ProcessTicks(pid string) (int64, error) {
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

// ParsePIDs reads a list of process ids separated by commas, each of a
// process this user can read the CPU time of.
func ParsePIDs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var pids []int
	for _, f := range strings.Split(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("%q is not a process id", f)
		}
		if _, err := ProcessTicks(strconv.Itoa(pid)); err != nil {
			return nil, fmt.Errorf("process %d: %v", pid, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
