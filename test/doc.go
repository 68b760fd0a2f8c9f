// Package test holds the multi-process cluster tests: real raftbusd
// processes on loopback or in network namespaces, faults injected by
// killing, stopping, pausing, skewing and partitioning nodes and by making
// their links lossy or slow, and checkers over the recorded histories.
package test
