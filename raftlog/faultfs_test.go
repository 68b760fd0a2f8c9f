package raftlog

import (
	"errors"
	"io"
	"sync"
)

// faultFS is the operating system's file system with a crash at a chosen
// moment: the failAt-th operation that changes anything fails, and so
// does everything after it, as if the process had died there. A crashing
// write puts its first cut bytes in the file (cut < 0: all but -cut); a
// crashing rename, removal, creation or allocation takes effect first when
// applied is set. Syncs are counted but skip the disk: nothing here
// simulates a power loss, only a process that stops.
type faultFS struct {
	OSFS
	mu      sync.Mutex
	ops     int
	failAt  int
	cut     int
	applied bool
	crashed bool
	kinds   []string // the kind of every operation, for a dry run
	sizes   []int    // and of writes, their size
}

var errCrashed = errors.New("crashed")

func (f *faultFS) step(kind string) (crash bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return false, errCrashed
	}
	f.ops++
	f.kinds = append(f.kinds, kind)
	f.sizes = append(f.sizes, 0)
	if f.ops == f.failAt {
		f.crashed = true
		return true, nil
	}
	return false, nil
}

// do runs op as an operation of kind: not at all when the process is gone,
// and before failing when it crashes here with applied set.
func (f *faultFS) do(kind string, op func() error) error {
	crash, err := f.step(kind)
	if err != nil {
		return err
	}
	if crash {
		if f.applied {
			op()
		}
		return errCrashed
	}
	return op()
}

func (f *faultFS) Create(name string) (File, error) {
	var file File
	err := f.do("create", func() error {
		var err error
		file, err = f.OSFS.Create(name)
		return err
	})
	if err != nil {
		if file != nil {
			file.Close()
		}
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) OpenRW(name string) (File, error) {
	file, err := f.OSFS.OpenRW(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(a, b string) error {
	return f.do("rename", func() error { return f.OSFS.Rename(a, b) })
}

func (f *faultFS) Remove(name string) error {
	return f.do("remove", func() error { return f.OSFS.Remove(name) })
}

func (f *faultFS) SyncDir(dir string) error {
	return f.do("syncdir", func() error { return nil })
}

func (f *faultFS) Lock(name string) (io.Closer, error) { return f.OSFS.Lock(name) }

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	crash, err := f.fs.step("write")
	if err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	f.fs.sizes[len(f.fs.sizes)-1] = len(p)
	f.fs.mu.Unlock()
	if crash {
		n := f.fs.cut
		if n < 0 {
			n += len(p)
		}
		n = max(0, min(n, len(p)))
		f.File.WriteAt(p[:n], off)
		return n, errCrashed
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	return f.fs.do("sync", func() error { return nil })
}

func (f *faultFile) Allocate(size int64) error {
	return f.fs.do("allocate", func() error { return f.File.Allocate(size) })
}
