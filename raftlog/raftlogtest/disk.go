// Package raftlogtest has a disk for tests of what runs on a node log:
// the operating system's file system, whose writes and syncs can be made
// to fail, as a disk that fills up or breaks, and whose syncs can be held
// or slowed.
package raftlogtest

import (
	"sync"
	"time"

	"github.com/raftbus/raftbus/raftlog"
)

// Disk is a raftlog.FS. Its zero value works as the operating system's.
type Disk struct {
	raftlog.OSFS
	mu      sync.Mutex
	err     error         // writes and syncs fail with it
	held    chan struct{} // non-nil: syncs wait until it is closed
	waiting chan struct{} // told when a sync starts waiting
	slow    time.Duration // added to every sync
}

// Fail makes every write and sync from now on fail with err.
func (d *Disk) Fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

// Slow adds d to every sync from now on, as a slow disk would.
func (d *Disk) Slow(by time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slow = by
}

// Hold makes syncs wait until Release.
func (d *Disk) Hold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = make(chan struct{})
	d.waitingLocked()
}

// Release lets held syncs, and those to come, through.
func (d *Disk) Release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		close(d.held)
		d.held = nil
	}
}

// Waiting is told when a sync starts waiting for Release (once, however
// many wait).
func (d *Disk) Waiting() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waitingLocked()
}

func (d *Disk) waitingLocked() chan struct{} {
	if d.waiting == nil {
		d.waiting = make(chan struct{}, 1)
	}
	return d.waiting
}

func (d *Disk) state() (held, waiting chan struct{}, slow time.Duration, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held, d.waiting, d.slow, d.err
}

func (d *Disk) Create(name string) (raftlog.File, error) {
	f, err := d.OSFS.Create(name)
	return file{f, d}, err
}

func (d *Disk) OpenRW(name string) (raftlog.File, error) {
	f, err := d.OSFS.OpenRW(name)
	return file{f, d}, err
}

type file struct {
	raftlog.File
	d *Disk
}

func (f file) WriteAt(p []byte, off int64) (int, error) {
	if _, _, _, err := f.d.state(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f file) Sync() error {
	held, waiting, slow, err := f.d.state()
	if err != nil {
		return err
	}
	time.Sleep(slow)
	if held != nil {
		select {
		case waiting <- struct{}{}:
		default:
		}
		<-held
	}
	return f.File.Sync()
}
