//go:build !race

package procs

const raceEnabled = false
