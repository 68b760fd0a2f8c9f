//go:build race

package procs

// raceEnabled builds raftbusd with the race detector when the tests that
// start it run under it, so that a race inside a node fails them too.
const raceEnabled = true
