package raftlog_test

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/raftbus/raftbus/raftlog"
	"github.com/raftbus/raftbus/raftlog/powercut"
)

var errPowerLost = errors.New("power lost")

// dyingFS is a process on a powercut disk whose power goes at its
// cutAt-th operation that changes anything: that operation and every one
// after it fail, and the disk keeps what a power cut leaves.
type dyingFS struct {
	raftlog.FS
	disk  *powercut.Disk
	keep  float64
	mu    sync.Mutex
	ops   int
	cutAt int
	dead  bool
	kinds []string
}

func (f *dyingFS) step(kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return errPowerLost
	}
	f.ops++
	f.kinds = append(f.kinds, kind)
	if f.ops == f.cutAt {
		f.dead = true
		f.disk.Cut(f.keep)
		return errPowerLost
	}
	return nil
}

func (f *dyingFS) alive() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return errPowerLost
	}
	return nil
}

func (f *dyingFS) Create(name string) (raftlog.File, error) {
	if err := f.step("create"); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name)
	return dyingFile{file, f}, err
}

func (f *dyingFS) OpenRW(name string) (raftlog.File, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenRW(name)
	return dyingFile{file, f}, err
}

func (f *dyingFS) Rename(oldname, newname string) error {
	if err := f.step("rename"); err != nil {
		return err
	}
	return f.FS.Rename(oldname, newname)
}

func (f *dyingFS) Remove(name string) error {
	if err := f.step("remove"); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *dyingFS) SyncDir(dir string) error {
	if err := f.step("syncdir"); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

func (f *dyingFS) List(dir string) ([]string, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.FS.List(dir)
}

func (f *dyingFS) Lock(name string) (io.Closer, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.FS.Lock(name)
}

type dyingFile struct {
	raftlog.File
	f *dyingFS
}

func (d dyingFile) WriteAt(p []byte, off int64) (int, error) {
	if err := d.f.step("write"); err != nil {
		return 0, err
	}
	return d.File.WriteAt(p, off)
}

func (d dyingFile) Sync() error {
	if err := d.f.step("sync"); err != nil {
		return err
	}
	return d.File.Sync()
}

func (d dyingFile) Allocate(size int64) error {
	if err := d.f.step("allocate"); err != nil {
		return err
	}
	return d.File.Allocate(size)
}

func (d dyingFile) ReadAt(p []byte, off int64) (int, error) {
	if err := d.f.alive(); err != nil {
		return 0, err
	}
	return d.File.ReadAt(p, off)
}

// TestPowerCutAtEveryStep runs the crash workload (rotations, seals,
// records rewritten forward, segments deleted, both truncations, stable
// values, a dropped group) on a disk that loses power at each of its
// operations in turn. A killed process leaves what it wrote in the page
// cache; a power cut leaves only what was synced, and of the rest any
// sectors and a first part of the namespace changes. Each cut is tried
// with nothing unsynced surviving and, twice, with about half of it:
// the log must reopen without taking the cut for damage, with everything
// it acknowledged.
func TestPowerCutAtEveryStep(t *testing.T) {
	dry := &dyingFS{FS: powercut.NewDisk(0).FS()}
	if err := raftlog.NewCrashWorkload().RunOn("/log", dry); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	count := map[string]int{}
	for _, k := range dry.kinds {
		count[k]++
	}
	t.Logf("%d operations: %v", len(dry.kinds), count)
	if count["syncdir"] == 0 || count["rename"] == 0 || count["remove"] == 0 {
		t.Fatalf("the workload misses namespace changes: %v", count)
	}

	for at := 1; at <= len(dry.kinds); at++ {
		for _, keep := range []float64{0, 0.5, 0.5} {
			seed := uint64(at)<<8 | uint64(keep*100) + uint64(len(t.Name()))
			disk := powercut.NewDisk(seed)
			what := fmt.Sprintf("power cut at operation %d (%s), unsynced writes kept with chance %.1f (seed %d)", at, dry.kinds[at-1], keep, seed)
			w := raftlog.NewCrashWorkload()
			if err := w.RunOn("/log", &dyingFS{FS: disk.FS(), disk: disk, keep: keep, cutAt: at}); err == nil {
				t.Fatalf("%s: the workload did not notice", what)
			}
			w.VerifyOn(t, "/log", disk.FS(), what+"\n"+disk.String())
		}
	}
}
