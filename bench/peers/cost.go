package main

import "github.com/raftbus/raftbus/internal/benchmeter"

// CPU is measured as `raftbus bench` measures it, with the same package
// (internal/benchmeter): utime+stime of this process and of the
// --node-pids processes, the machine's busy time, and as foreign load
// what the machine was busy with beyond those processes.

// phaseReport is what a phase cost, per message of messages, for nodes
// node processes.
func phaseReport(d benchmeter.CPUDelta, name string, messages int64, nodes int) PhaseReport {
	p := PhaseReport{Name: name, Seconds: d.Seconds, Messages: messages, CPUUnavailable: d.Err}
	if d.Err == "" {
		p.CPU = d.Report(messages, nodes)
	}
	return p
}
