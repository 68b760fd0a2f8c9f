package raftlog

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// A queued append returns while its sync is held; it is neither counted,
// nor awaited as durable, nor read until the sync completes.
func TestQueuedAppendIsDurableOnlyAfterItsSync(t *testing.T) {
	fs := &blockingFS{syncing: make(chan struct{}), release: make(chan struct{})}
	l, err := Open(t.TempDir(), Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		go func() {
			for range fs.syncing {
				fs.release <- struct{}{}
			}
		}()
		l.Close()
		close(fs.syncing)
	}()
	g := openGroup(t, l, "g")
	go func() {
		// The segment header's sync, then the first batch's.
		for range 2 {
			<-fs.syncing
			fs.release <- struct{}{}
		}
	}()
	store(t, g, 1, 1, 1, 10)

	if err := g.StoreLogsQueued(entries("g", 2, 3, 1, 10)); err != nil {
		t.Fatalf("queued append: %v", err)
	}
	<-fs.syncing // the queued batch is written; its sync is held
	durable := make(chan error, 1)
	go func() { durable <- g.WaitDurable(3) }()
	read := make(chan error, 1)
	go func() {
		var e raft.Log
		read <- g.GetLog(3, &e)
	}()
	if last, _ := g.LastIndex(); last != 1 {
		t.Fatalf("last index %d while the sync is held, want 1", last)
	}
	select {
	case err := <-durable:
		t.Fatalf("WaitDurable returned (%v) while the sync is held", err)
	case err := <-read:
		t.Fatalf("GetLog returned (%v) while the sync is held", err)
	default:
	}
	fs.release <- struct{}{}
	if err := <-durable; err != nil {
		t.Fatalf("WaitDurable: %v", err)
	}
	if err := <-read; err != nil {
		t.Fatalf("GetLog of the queued entry: %v", err)
	}
	checkRange(t, g, 1, 3, 10)
}

// Requests of a group keep their order: a delete after queued appends
// applies to them, and a close writes them first.
func TestQueuedAppendsKeepTheirOrder(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := openGroup(t, l, "g")
	for i := uint64(1); i <= 20; i += 2 {
		if err := g.StoreLogsQueued(entries("g", i, i+1, 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.DeleteRange(16, 20); err != nil {
		t.Fatalf("delete after queued appends: %v", err)
	}
	checkRange(t, g, 1, 15, 100)
	if err := g.StoreLogsQueued(entries("g", 16, 30, 2, 100)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{})
	g = openGroup(t, l, "g")
	f, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	if f != 1 || last != 30 {
		t.Fatalf("after reopening the group holds %d-%d, want 1-30", f, last)
	}
}

// A queued append whose write fails fails the log: WaitDurable reports
// it, and so does the next append.
func TestQueuedAppendThatFailsIsReported(t *testing.T) {
	fs := &faultFS{}
	l := openLog(t, filepath.Join(t.TempDir(), "log"), Options{FS: fs})
	g := openGroup(t, l, "g")
	store(t, g, 1, 1, 1, 10)
	fs.mu.Lock()
	fs.failAt = fs.ops + 1 // the next write
	fs.mu.Unlock()
	if err := g.StoreLogsQueued(entries("g", 2, 2, 1, 10)); err != nil {
		t.Fatalf("queued append: %v", err)
	}
	if err := g.WaitDurable(2); !errors.Is(err, errCrashed) {
		t.Fatalf("WaitDurable after a failed write: %v, want the write's error", err)
	}
	if err := g.StoreLogsQueued(entries("g", 3, 3, 1, 10)); !errors.Is(err, errCrashed) {
		t.Fatalf("queued append after a failed write: %v, want the write's error", err)
	}
	var e raft.Log
	if err := g.GetLog(2, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of the lost entry: %v, want ErrLogNotFound", err)
	}
}

// WaitDurable for an entry nobody stored fails at once rather than wait.
func TestWaitDurableForAnEntryNeverStored(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	g := openGroup(t, l, "g")
	store(t, g, 1, 2, 1, 10)
	if err := g.WaitDurable(2); err != nil {
		t.Fatalf("WaitDurable of a stored entry: %v", err)
	}
	if err := g.WaitDurable(3); err == nil {
		t.Fatal("WaitDurable of an entry never stored returned nil")
	}
}

// A failed write is told to OnFail once, however many callers see it.
func TestOnFailIsToldOnce(t *testing.T) {
	fs := &faultFS{}
	failed := make(chan error, 2)
	l := openLog(t, filepath.Join(t.TempDir(), "log"), Options{FS: fs, OnFail: func(err error) { failed <- err }})
	g := openGroup(t, l, "g")
	store(t, g, 1, 1, 1, 10)
	fs.mu.Lock()
	fs.failAt = fs.ops + 1 // the next write
	fs.mu.Unlock()
	for i := uint64(2); i <= 4; i++ {
		if err := g.StoreLogs(entries("g", i, i, 1, 10)); !errors.Is(err, errCrashed) {
			t.Fatalf("append %d after the failure: %v, want the write's error", i, err)
		}
	}
	if err := <-failed; !errors.Is(err, errCrashed) {
		t.Fatalf("OnFail was told %v, want the write's error", err)
	}
	if err := l.Close(); err == nil {
		t.Fatal("a failed log closed without an error")
	}
	select {
	case err := <-failed:
		t.Fatalf("OnFail told twice (then %v)", err)
	default:
	}
}
