package benchmeter

import (
	"math"
	"runtime"
	"testing"
)

func TestReadsCPUTimeFromProc(t *testing.T) {
	ticks, err := parseProcessTicks("4242 (raft bus) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 12 0 1000 0 0")
	if err != nil || ticks != 281 {
		t.Fatalf("utime+stime of a process whose name has spaces and parentheses: %d, %v; want 281", ticks, err)
	}
	busy, steal, err := parseMachineTicks("cpu  100 5 40 900 7 3 2 11 0 0\ncpu0 50 0 20 450 3 1 1 5 0 0\n")
	if err != nil || busy != 150 || steal != 11 {
		t.Fatalf("busy %d, steal %d, %v; want user+nice+system+irq+softirq 150, steal 11", busy, steal, err)
	}
	if _, err := parseProcessTicks("4242 (x) S 1"); err == nil {
		t.Fatal("a short stat line was read")
	}
	if _, _, err := parseMachineTicks("intr 1 2 3"); err == nil {
		t.Fatal("/proc/stat without its cpu line was read")
	}
}

func TestCountsWhatOthersUsedAsForeignLoad(t *testing.T) {
	// 10 s, 1000 messages: the client used 1 s, the nodes 3 s, and the
	// machine was busy for 4.5 s: 0.05 of a core went to others.
	quiet := CPUDelta{Seconds: 10, Self: 100, Nodes: 300, Busy: 450}.Report(1000, 3)
	if quiet.MicrosPerMessage != 4000 || quiet.MachineMicrosPerMessage != 4500 || math.Abs(quiet.ForeignCores-0.05) > 1e-9 {
		t.Fatalf("quiet run: %+v", quiet)
	}
	if quiet.ForeignLoad {
		t.Fatalf("0.05 cores of others flagged: %+v", quiet)
	}
	busy := CPUDelta{Seconds: 10, Self: 100, Nodes: 300, Busy: int64(400 + ClockTicks*10*runtime.NumCPU()/5)}.Report(1000, 3)
	if !busy.ForeignLoad {
		t.Fatalf("a fifth of the machine used by others not flagged: %+v", busy)
	}
}
