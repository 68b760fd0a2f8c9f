package raftlog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// SegmentSize is the size segment files are preallocated to; a new
	// segment starts when a batch would not fit. Default 64 MiB.
	SegmentSize int64
	// RetainBytes is how much log the node keeps before it rewrites the
	// live records of groups that pin the oldest segment (see Log). The
	// log is also allowed twice its live bytes. Default four segments.
	RetainBytes int64
	// FS is the file system; the operating system's by default.
	FS FS
	// Logger receives the log's own reports (damage found, torn tail
	// repaired); nil discards them.
	Logger *slog.Logger
	// OnDamage, when set, is called (on a goroutine of its own) when a
	// group is found damaged while the log runs: a record that fails its
	// checksum on read. Damage found when the log is opened is in
	// Recovery instead.
	OnDamage func(group string, err error)
	// OnSync, when set, is told how long each sync of an append batch
	// took (the fdatasync alone), for metrics. It runs on the writer and
	// must not block.
	OnSync func(d time.Duration)
	// OnFail, when set, is called once (on a goroutine of its own) when
	// the log fails a write or a sync: it takes no more writes until it
	// is opened again.
	OnFail func(err error)
}

const (
	defaultSegmentSize = 64 << 20
	// maxBatchBytes bounds what one write gathers from waiting callers; a
	// single larger request is written alone.
	maxBatchBytes = 8 << 20
	// maxKeptBatchBuffer bounds the batch buffer the writer keeps.
	maxKeptBatchBuffer = maxBatchBytes + 1<<20
	// requestQueue is how many requests wait for the writer before the
	// next caller blocks.
	requestQueue = 256
)

func (o Options) withDefaults() Options {
	if o.SegmentSize <= 0 {
		o.SegmentSize = defaultSegmentSize
	}
	if o.SegmentSize < segmentHeaderSize+batchFrameSize {
		o.SegmentSize = segmentHeaderSize + batchFrameSize
	}
	if o.RetainBytes <= 0 {
		o.RetainBytes = 4 * o.SegmentSize
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Log is a node's Raft log: the entries and stable state of every Raft
// group on the node, in one sequence of segment files. Appends from
// concurrent groups that arrive while a write is on its way are gathered
// into the next write, so one write and one sync serve them all; each
// caller returns once its records are durable.
//
// Segments are deleted from the oldest once no group has a live record in
// them. A group that pins the oldest segment while the log holds more than
// RetainBytes and more than twice its live bytes has its records there
// rewritten at the head of the log, so an idle group never keeps old
// segments alive.
type Log struct {
	dir  string
	opts Options
	fs   FS
	lock io.Closer
	log  *slog.Logger

	// mu guards the index: groups, segments and what they hold. Readers
	// hold it while they read a segment, so a segment is never closed
	// under them.
	mu     sync.RWMutex
	groups map[string]*group
	segs   []*segment // oldest first

	// nextBatch is the sequence number of the next batch written.
	nextBatch atomic.Uint64
	// batchBuf is where the writer lays out each batch, kept from one
	// batch to the next (up to maxKeptBatchBuffer): a new buffer for
	// every batch cost an allocation, zeroing and page faults as large
	// as the batch.
	batchBuf []byte

	recovery Recovery
	stats    counters

	// written is closed (and replaced) under mu after every batch the
	// writer handles, for WaitDurable.
	written chan struct{}

	failMu sync.Mutex
	failed error // a write or sync failed: the log takes no more writes

	// reqs is the writer's queue, in the order of the calls: a caller that
	// does not wait for its append (StoreLogsQueued) must not hold up
	// while a batch is being written, nor be overtaken by its group's
	// next request.
	reqs chan *request
	done chan struct{} // closed when the writer has stopped
	// collectDue is set when segments may have become free; carrying is
	// the carry under way (both the writer's).
	collectDue bool
	carrying   *carryState
	closeOnce  sync.Once
	closeErr   error
}

// segment is one segment file.
type segment struct {
	seq        uint32
	f          File
	firstBatch uint64
	end        int64 // bytes in use: the write offset of the active segment
	// dropped is how far the segment's pages have been let go of the page
	// cache (Log.dropWritten); the writer's alone.
	dropped int64
	sealed  bool
}

func segmentName(seq uint32) string { return fmt.Sprintf("%020d.seg", seq) }

// Recovery is what opening the log found.
type Recovery struct {
	// Damaged maps every group whose records cannot all be trusted to
	// what was found. Such a group must be rebuilt: Group refuses it
	// until DropGroup.
	Damaged map[string]error
	// Unattributed reports a loss of records whose groups are unknown.
	// Every group the log knows that may have had records there is in
	// Damaged; a group that has no record left in the log at all may also
	// have lost every one of its records that way.
	Unattributed bool
	// TornBytes is the size of the torn tail repaired: the last write
	// before a crash, never acknowledged. Not damage.
	TornBytes int64
	// Clean reports that the log was closed cleanly last time.
	Clean bool
}

// Stats counts the log's work since it was opened.
type Stats struct {
	// Syncs is how many times the log made writes durable, Batches how
	// many writes it made for its callers, Requests how many calls those
	// writes served.
	Syncs, Batches, Requests uint64
	// BytesWritten is what the log wrote to its segment files; of it,
	// CarriedBytes are live records rewritten forward to free old
	// segments.
	BytesWritten, CarriedBytes uint64
	// Segments is the current number of segment files, Bytes what they
	// hold.
	Segments int
	Bytes    int64
}

type counters struct {
	syncs, batches, requests, bytes, carried atomic.Uint64
}

var (
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("raftlog: log is closed")
	// ErrDropped is returned by calls on a Group that was dropped.
	ErrDropped = errors.New("raftlog: group was dropped")
	// ErrNotFound is what StableStore.Get returns for a missing key; raft
	// recognises it by its text.
	ErrNotFound = errors.New("not found")
)

// DamagedError says that a group's records in the log cannot be trusted.
type DamagedError struct {
	Group string
	Err   error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("raftlog: group %s is damaged: %v", e.Group, e.Err)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// Open opens the log in dir, creating it when missing, and replays it:
// every record is read and checked. A torn tail left by a crash is
// repaired; damage is reported in Recovery and the groups concerned are
// refused until dropped. Open fails when the log as a whole cannot be
// read (a segment missing, a file unreadable).
func Open(dir string, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	l := &Log{
		dir:     dir,
		opts:    opts,
		fs:      opts.FS,
		log:     opts.Logger,
		groups:  make(map[string]*group),
		reqs:    make(chan *request, requestQueue),
		done:    make(chan struct{}),
		written: make(chan struct{}),
	}
	if err := l.fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	lock, err := l.fs.Lock(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("raftlog: lock %s: %w", dir, err)
	}
	l.lock = lock
	if err := l.replay(); err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("raftlog: %s: %w", dir, err)
	}
	l.collectDue = true
	go l.runWriter()
	return l, nil
}

// Recovery returns what opening the log found.
func (l *Log) Recovery() Recovery { return l.recovery }

// Dir is the directory of the log.
func (l *Log) Dir() string { return l.dir }

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	s := Stats{
		Syncs:        l.stats.syncs.Load(),
		Batches:      l.stats.batches.Load(),
		Requests:     l.stats.requests.Load(),
		BytesWritten: l.stats.bytes.Load(),
		CarriedBytes: l.stats.carried.Load(),
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	s.Segments = len(l.segs)
	for _, sg := range l.segs {
		s.Bytes += sg.end
	}
	return s
}

// Groups returns the names of the groups that have records in the log.
func (l *Log) Groups() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []string
	for name, g := range l.groups {
		if g.hasRecords() {
			out = append(out, name)
		}
	}
	return out
}

// Close stops the writer, records durably where the data ends (so the
// next Open knows the log was closed cleanly) and closes the files. Calls after Close fail with ErrClosed.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		r := &request{op: opClose, done: make(chan error, 1)}
		select {
		case l.reqs <- r:
			l.closeErr = <-r.done
		case <-l.done:
		}
		<-l.done
		if err := l.closeFiles(); err != nil && l.closeErr == nil {
			l.closeErr = err
		}
	})
	return l.closeErr
}

func (l *Log) closeFiles() error {
	var first error
	l.mu.Lock()
	for _, s := range l.segs {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	l.segs = nil
	l.mu.Unlock()
	if l.lock != nil {
		if err := l.lock.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// fail puts the log out of service after a failed write or sync: what
// the file holds past the last good sync is unknown, so the next
// trustworthy state is the one replay finds.
func (l *Log) fail(err error) error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("raftlog: %s: writes stopped after a failed write: %w", l.dir, err)
		l.log.Error("node log failed; restart the node to recover it", "dir", l.dir, "err", err)
		if l.opts.OnFail != nil {
			go l.opts.OnFail(l.failed)
		}
	}
	return l.failed
}

// signalWritten wakes those waiting in WaitDurable.
func (l *Log) signalWritten() {
	l.mu.Lock()
	close(l.written)
	l.written = make(chan struct{})
	l.mu.Unlock()
}

func (l *Log) failure() error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	return l.failed
}

// markDamaged records damage found while the log runs and tells the
// owner.
func (l *Log) markDamaged(g *group, err error) error {
	l.mu.Lock()
	first := g.damaged == nil
	if first {
		g.damaged = err
	}
	l.mu.Unlock()
	derr := &DamagedError{Group: g.name, Err: g.damaged}
	if first {
		l.log.Error("node log: group damaged", "group", g.name, "err", err)
		if l.opts.OnDamage != nil {
			go l.opts.OnDamage(g.name, err)
		}
	}
	return derr
}

// segmentFor returns the segment with sequence number seq; l.mu held.
func (l *Log) segmentFor(seq uint32) *segment {
	if len(l.segs) == 0 {
		return nil
	}
	i := int(seq) - int(l.segs[0].seq)
	if i < 0 || i >= len(l.segs) {
		return nil
	}
	return l.segs[i]
}
