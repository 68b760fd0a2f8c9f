// Package test holds the multi-process cluster tests: real raftbusd
// processes on loopback, faults injected by killing, pausing and isolating
// nodes, and checkers over the recorded histories.
package test
