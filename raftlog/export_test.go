package raftlog

import "testing"

// The crash workload, for the tests of package raftlog_test (which may
// import what imports raftlog).

type CrashWorkload = crashWorkload

var (
	NewCrashWorkload = newCrashWorkload
	CrashOptions     = crashOptions
)

func (w *crashWorkload) Run(l *Log) error { return w.run(l) }

func (w *crashWorkload) VerifyOn(t *testing.T, dir string, fs FS, what string) {
	t.Helper()
	w.verifyOn(t, dir, fs, what)
}
