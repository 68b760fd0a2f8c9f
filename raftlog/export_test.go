package raftlog

import "testing"

// The crash workload, for the tests of package raftlog_test (which may
// import what imports raftlog).

type CrashWorkload = crashWorkload

var NewCrashWorkload = newCrashWorkload

func (w *crashWorkload) RunOn(dir string, fs FS) error { return w.runOn(dir, fs) }

func (w *crashWorkload) VerifyOn(t *testing.T, dir string, fs FS, what string) {
	t.Helper()
	w.verifyOn(t, dir, fs, what)
}
