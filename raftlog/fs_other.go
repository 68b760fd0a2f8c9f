//go:build !linux

package raftlog

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

// Elsewhere than Linux the log works, with a full sync per batch and no
// lock against a second process.
func lockFile(*os.File) error            { return nil }
func datasync(f *os.File) error          { return f.Sync() }
func allocate(f *os.File, n int64) error { return f.Truncate(n) }

func dropCache(*os.File, int64, int64) error { return nil }
