// Package powercut is a disk in memory that can lose power, for tests of
// what a node log keeps through a power cut. A process killed with
// SIGKILL leaves its writes in the kernel's page cache, so a crash test of
// real processes never loses a write that was not synced; a power cut
// does, and only this shows whether every sync is where it must be.
//
// The model follows what Linux file systems promise, and no more:
//
//   - A file's bytes (and its size) are durable once the file is synced.
//     Of what was written since, each 512-byte sector may survive a cut or
//     not, independently of the others and of the order of the writes, as
//     from a drive's volatile cache.
//   - Creations, renames and removals (the namespace) are durable once a
//     directory is synced; as in a journaling file system, they survive a
//     cut in order: some first part of those made since the last directory
//     sync survives, the rest does not. A file whose creation did not
//     survive is gone, whatever was synced into it.
//   - Directories made by MkdirAll are durable at once.
//
// A Disk outlives the processes that use it: FS is a process's view of
// it, and Cut ends that view. What the old view does after a cut (a
// process that has not noticed yet) goes to a world of its own that
// nothing will read, so a test may stop the old process at its leisure.
package powercut

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftbus/raftbus/raftlog"
)

// sector is the unit of a write that survives a cut whole or not at all.
const sector = 512

// Disk is a disk that can lose power.
type Disk struct {
	mu  sync.Mutex
	rng *rand.Rand
	w   *world
	// syncTime is the most a sync takes (see SetSyncTime).
	syncTime time.Duration
}

// SetSyncTime makes each file sync take a while, up to d (drawn from the
// disk's seed), as a real disk's does: what was written before the sync
// began is durable when it returns, and a cut meanwhile keeps it only as
// unsynced writes are kept. Zero, the default, makes syncs instant, and
// leaves no time in which a caller may act on what is not yet durable.
func (d *Disk) SetSyncTime(limit time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncTime = limit
}

// NewDisk returns an empty disk; seed drives which unsynced writes
// survive a cut.
func NewDisk(seed uint64) *Disk {
	return &Disk{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), w: newWorld()}
}

// world is the disk as one process (between two power cuts) sees it.
type world struct {
	// files is the namespace as the process sees it, by clean path.
	files map[string]*inode
	// synced is the namespace as of the last directory sync, and ops what
	// was done to it since, in order.
	synced map[string]*inode
	ops    []nsOp
	dirs   map[string]bool
	locks  map[string]bool
}

func newWorld() *world {
	return &world{files: map[string]*inode{}, synced: map[string]*inode{}, dirs: map[string]bool{}, locks: map[string]bool{}}
}

// nsOp is one change of the namespace: name now names ino (nil: nothing),
// and, for a rename, from names nothing; a rename survives a cut whole or
// not at all.
type nsOp struct {
	name string
	ino  *inode
	from string
}

func (op nsOp) apply(names map[string]*inode) {
	if op.from != "" {
		delete(names, op.from)
	}
	if op.ino == nil {
		delete(names, op.name)
	} else {
		names[op.name] = op.ino
	}
}

func (w *world) change(op nsOp) {
	op.apply(w.files)
	w.ops = append(w.ops, op)
}

// inode is one file's contents: as the process sees them, and as they are
// on the platter.
type inode struct {
	data        []byte // what the process reads, up to size
	size        int64
	durable     []byte
	durableSize int64
	// unsynced are the writes since the last sync, in order.
	unsynced []extent
}

type extent struct {
	off  int64
	data []byte
}

// Cut loses power: what was not durable survives only as the model
// allows, each unsynced sector and namespace change with probability
// keep (0: none of them). The next FS sees what survived; views taken
// before go on in a world nobody reads.
func (d *Disk) Cut(keep float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.w
	// The namespace: the synced one, then a first part of the changes since.
	survive := 0
	for survive < len(old.ops) && d.rng.Float64() < keep {
		survive++
	}
	names := make(map[string]*inode, len(old.synced))
	for n, ino := range old.synced {
		names[n] = ino
	}
	for _, op := range old.ops[:survive] {
		op.apply(names)
	}
	// The contents: what was synced, and the sectors of later writes that
	// happened to reach the platter. One inode may have several names.
	after := map[*inode]*inode{}
	w := newWorld()
	for n := range old.dirs {
		w.dirs[n] = true
	}
	for _, n := range sortedNames(names) {
		ino := names[n]
		if _, ok := after[ino]; !ok {
			after[ino] = d.settle(ino, keep)
		}
		w.files[n] = after[ino]
		w.synced[n] = after[ino]
	}
	d.w = w
}

// settle is what is left of ino after a cut.
func (d *Disk) settle(ino *inode, keep float64) *inode {
	out := &inode{durable: slices.Clone(ino.durable), durableSize: ino.durableSize}
	if keep > 0 && d.rng.Float64() < keep {
		out.durableSize = ino.size
	}
	for _, e := range ino.unsynced {
		for s := int64(0); s < int64(len(e.data)); {
			// The sector of the file this part of the write falls in.
			end := min((e.off+s)/sector*sector+sector-e.off, int64(len(e.data)))
			if keep > 0 && d.rng.Float64() < keep {
				out.durable = writeAt(out.durable, e.data[s:end], e.off+s)
			}
			s = end
		}
	}
	out.data = slices.Clone(out.durable)
	out.size = out.durableSize
	return out
}

// FS is the disk as a process that starts now sees it.
func (d *Disk) FS() raftlog.FS { return &view{d: d, w: d.w} }

func sortedNames(m map[string]*inode) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func writeAt(buf, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(buf)) {
		buf = append(buf, make([]byte, end-int64(len(buf)))...)
	}
	copy(buf[off:], p)
	return buf
}

// view is one process's file system on a disk.
type view struct {
	d *Disk
	w *world
}

var _ raftlog.FS = (*view)(nil)

func (v *view) lock() func() {
	v.d.mu.Lock()
	return v.d.mu.Unlock
}

func (v *view) checkDir(name string) error {
	if dir := filepath.Dir(name); !v.w.dirs[dir] {
		return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return nil
}

func (v *view) Create(name string) (raftlog.File, error) {
	defer v.lock()()
	name = filepath.Clean(name)
	if err := v.checkDir(name); err != nil {
		return nil, err
	}
	if _, ok := v.w.files[name]; ok {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	ino := &inode{}
	v.w.change(nsOp{name: name, ino: ino})
	return &file{v: v, ino: ino}, nil
}

func (v *view) OpenRW(name string) (raftlog.File, error) {
	defer v.lock()()
	ino, ok := v.w.files[filepath.Clean(name)]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &file{v: v, ino: ino}, nil
}

func (v *view) Rename(oldname, newname string) error {
	defer v.lock()()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	ino, ok := v.w.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	if err := v.checkDir(newname); err != nil {
		return err
	}
	v.w.change(nsOp{name: newname, ino: ino, from: oldname})
	return nil
}

func (v *view) Remove(name string) error {
	defer v.lock()()
	name = filepath.Clean(name)
	if _, ok := v.w.files[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	v.w.change(nsOp{name: name})
	return nil
}

func (v *view) List(dir string) ([]string, error) {
	defer v.lock()()
	dir = filepath.Clean(dir)
	if !v.w.dirs[dir] {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	var names []string
	for n := range v.w.files {
		if filepath.Dir(n) == dir {
			names = append(names, filepath.Base(n))
		}
	}
	for n := range v.w.dirs {
		if n != dir && filepath.Dir(n) == dir {
			names = append(names, filepath.Base(n))
		}
	}
	slices.Sort(names)
	return names, nil
}

func (v *view) MkdirAll(dir string) error {
	defer v.lock()()
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		v.w.dirs[d] = true
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// SyncDir makes every namespace change so far durable: a journaling file
// system commits them all in one transaction, whichever directory is
// synced.
func (v *view) SyncDir(dir string) error {
	defer v.lock()()
	if !v.w.dirs[filepath.Clean(dir)] {
		return &fs.PathError{Op: "sync", Path: dir, Err: fs.ErrNotExist}
	}
	for _, op := range v.w.ops {
		op.apply(v.w.synced)
	}
	v.w.ops = nil
	return nil
}

// Lock creates the file if need be, as the operating system's does, and
// holds a lock on it until the power goes or the Closer is closed.
func (v *view) Lock(name string) (io.Closer, error) {
	defer v.lock()()
	name = filepath.Clean(name)
	if err := v.checkDir(name); err != nil {
		return nil, err
	}
	if v.w.locks[name] {
		return nil, fmt.Errorf("%s is locked", name)
	}
	if _, ok := v.w.files[name]; !ok {
		v.w.change(nsOp{name: name, ino: &inode{}})
	}
	v.w.locks[name] = true
	return closerFunc(func() error {
		defer v.lock()()
		delete(v.w.locks, name)
		return nil
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

var errClosed = errors.New("powercut: file already closed")

// file is an open file of a view.
type file struct {
	v      *view
	ino    *inode
	closed bool
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	defer f.v.lock()()
	if f.closed {
		return 0, errClosed
	}
	if off >= f.ino.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.ino.size-off))
	clear(p[:n])
	if off < int64(len(f.ino.data)) {
		copy(p[:n], f.ino.data[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	defer f.v.lock()()
	if f.closed {
		return 0, errClosed
	}
	f.ino.data = writeAt(f.ino.data, p, off)
	f.ino.size = max(f.ino.size, off+int64(len(p)))
	f.ino.unsynced = append(f.ino.unsynced, extent{off, slices.Clone(p)})
	return len(p), nil
}

func (f *file) Sync() error {
	unlock := f.v.lock()
	if f.closed {
		unlock()
		return errClosed
	}
	// What is written from now on is not this sync's.
	n, size := len(f.ino.unsynced), f.ino.size
	var wait time.Duration
	if limit := f.v.d.syncTime; limit > 0 {
		wait = time.Duration(f.v.d.rng.Int64N(int64(limit))) + 1
	}
	unlock()
	if wait > 0 {
		time.Sleep(wait) // the disk at work, not a wait for an event
	}
	defer f.v.lock()()
	for _, e := range f.ino.unsynced[:n] {
		f.ino.durable = writeAt(f.ino.durable, e.data, e.off)
	}
	f.ino.unsynced = slices.Delete(f.ino.unsynced, 0, n)
	f.ino.durableSize = max(f.ino.durableSize, size)
	return nil
}

// Allocate sets the size (the blocks of a disk in memory need no
// reserving); like a write, the new size is durable at the next sync.
func (f *file) Allocate(size int64) error {
	defer f.v.lock()()
	if f.closed {
		return errClosed
	}
	f.ino.size = max(f.ino.size, size)
	return nil
}

func (f *file) Size() (int64, error) {
	defer f.v.lock()()
	if f.closed {
		return 0, errClosed
	}
	return f.ino.size, nil
}

func (f *file) Close() error {
	defer f.v.lock()()
	if f.closed {
		return errClosed
	}
	f.closed = true
	return nil
}

// String describes the disk's files, for test failures.
func (d *Disk) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, n := range sortedNames(d.w.files) {
		ino := d.w.files[n]
		fmt.Fprintf(&b, "%s: %d bytes (%d durable, %d writes unsynced)\n", n, ino.size, ino.durableSize, len(ino.unsynced))
	}
	return b.String()
}
