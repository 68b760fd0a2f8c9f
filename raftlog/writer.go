package raftlog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

type opKind uint8

const (
	opAppend opKind = iota + 1
	opDelete
	opState
	opDrop
	opClose
)

// request is one call waiting for the writer.
type request struct {
	g     *group
	op    opKind
	recs  []encoded // the writer encodes deletes and drops
	first uint64    // append: index of the first entry
	min   uint64    // delete: range
	max   uint64
	key   string // state
	value []byte
	done  chan error
	// queued: the caller did not wait (StoreLogsQueued); the group counts
	// it in pending until it is answered.
	queued bool

	// Filled in by the writer: what the request does to the index.
	effect   opKind // opDelete becomes one of the two truncations
	truncAt  uint64
	truncTop bool // truncation of the prefix (below truncAt), else suffix
}

// submit hands r to the writer and waits until it is durable.
func (l *Log) submit(r *request) error {
	if err := l.hand(r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-l.done:
		// The writer stopped: it answered r before, or never will (r
		// came after the close).
		select {
		case err := <-r.done:
			return err
		default:
			return l.closedError()
		}
	}
}

// hand gives r to the writer, in the order of the calls.
func (l *Log) hand(r *request) error {
	if err := l.failure(); err != nil {
		return err
	}
	r.done = make(chan error, 1)
	if r.queued {
		r.g.pending.Add(1) // before the writer can answer it
	}
	select {
	case l.reqs <- r:
		return nil
	case <-l.done:
		if r.queued {
			r.g.pending.Add(-1)
		}
		return l.closedError()
	}
}

// closedError is what a call gets once the writer has stopped.
func (l *Log) closedError() error {
	if err := l.failure(); err != nil {
		return err
	}
	return ErrClosed
}

// finish answers r.
func (r *request) finish(err error) {
	r.done <- err
	if r.queued {
		r.g.pending.Add(-1)
	}
}

// runWriter is the log's only writer: it takes the first waiting request,
// gathers whatever else waits, writes it all as one batch with one sync,
// then answers every caller. Segment rotation and collection happen here
// too, between batches.
func (l *Log) runWriter() {
	defer close(l.done)
	for {
		var first *request
		if l.carrying != nil {
			// A carry under way goes on while no caller waits.
			select {
			case first = <-l.reqs:
			default:
				l.collect()
				continue
			}
		} else {
			first = <-l.reqs
		}
		reqs := []*request{first}
		size := requestBytes(first)
	gather:
		for size < maxBatchBytes && first.op != opClose {
			select {
			case r := <-l.reqs:
				reqs = append(reqs, r)
				size += requestBytes(r)
				if r.op == opClose {
					break gather
				}
			default:
				break gather
			}
		}
		closing := l.commit(reqs)
		if closing {
			return
		}
		l.dropWritten()
	}
}

// cacheDropper is a File that can let go of its pages in the page cache.
type cacheDropper interface {
	DropCache(off, n int64) error
}

// dropWritten lets the kernel free the page cache of what the active
// segment holds, whole pages only, once its callers have their answers.
//
// Nothing reads those pages soon: Raft keeps the newest entries in memory
// and reads the log only to catch up a follower that fell behind, and the
// engine keeps its state in memory. Left in the cache, they grow it by
// every byte written, and on a virtual machine whose host takes back the
// memory the guest frees, the copy into fresh pages cost up to 15 % of the
// nodes' CPU in some runs (docs/benchmarks.md), where writing into the
// same few pages again, and the drop, cost 3 %. The partial page at the
// end stays, so that the next write need not read it back.
func (l *Log) dropWritten() {
	s := l.active()
	if s == nil {
		return
	}
	d, ok := s.f.(cacheDropper)
	if !ok {
		return
	}
	end := s.end &^ int64(os.Getpagesize()-1)
	if end <= s.dropped {
		return
	}
	// A failure costs memory, not data: the pages stay cached.
	_ = d.DropCache(s.dropped, end-s.dropped)
	s.dropped = end
}

func requestBytes(r *request) int {
	n := 0
	for _, e := range r.recs {
		n += e.n
	}
	return n
}

// span is a group's entry range as the requests of one batch leave it.
type span struct{ first, last uint64 }

// commit writes one batch for reqs and answers them. It reports whether
// a close request was among them (the writer then stops).
func (l *Log) commit(reqs []*request) (closing bool) {
	// Whatever happens, those waiting for entries to become durable look
	// again.
	defer l.signalWritten()
	if err := l.failure(); err != nil {
		for _, r := range reqs {
			r.finish(err)
		}
		return hasClose(reqs)
	}
	views := make(map[*group]*span)
	var recs []encoded
	var groups []string
	seen := make(map[string]bool)
	accepted := reqs[:0:0]
	for _, r := range reqs {
		if r.op == opClose {
			closing = true
			continue
		}
		l.abandonCarry(r)
		if err := l.plan(r, views); err != nil {
			r.finish(err)
			continue
		}
		if len(r.recs) == 0 {
			r.finish(nil) // nothing to write (a delete of nothing)
			continue
		}
		accepted = append(accepted, r)
		recs = append(recs, r.recs...)
		if !seen[r.g.name] {
			seen[r.g.name] = true
			groups = append(groups, r.g.name)
		}
	}
	var err error
	if len(accepted) > 0 {
		var at []loc
		at, err = l.writeBatch(recs, groups)
		if err == nil {
			l.applyAll(accepted, at)
			l.stats.requests.Add(uint64(len(accepted)))
		}
		for _, r := range accepted {
			r.finish(err)
		}
	}
	if closing {
		cerr := err
		if cerr == nil {
			cerr = l.writeClosedMark()
		}
		for _, r := range reqs {
			if r.op == opClose {
				r.finish(cerr)
			}
		}
		return true
	}
	if err == nil {
		l.collect()
	}
	return false
}

func hasClose(reqs []*request) bool {
	for _, r := range reqs {
		if r.op == opClose {
			return true
		}
	}
	return false
}

// plan checks r against the group as the batch so far leaves it, and
// encodes the records the writer owes it.
func (l *Log) plan(r *request, views map[*group]*span) error {
	g := r.g
	l.mu.RLock()
	dropped, damaged := g.dropped, g.damaged
	v := views[g]
	if v == nil {
		v = &span{first: g.first, last: g.last()}
		views[g] = v
	}
	l.mu.RUnlock()
	switch {
	case dropped:
		return ErrDropped
	case damaged != nil && r.op != opDrop:
		return &DamagedError{Group: g.name, Err: damaged}
	}
	r.effect = r.op
	switch r.op {
	case opAppend:
		n := uint64(len(r.recs))
		if v.last != 0 && r.first != v.last+1 {
			return fmt.Errorf("raftlog: group %s: entry %d does not follow the last stored entry %d", g.name, r.first, v.last)
		}
		if v.last == 0 {
			v.first = r.first
		}
		v.last = r.first + n - 1
	case opDelete:
		switch {
		case v.last == 0 || r.max < v.first || r.min > v.last:
			return nil // nothing stored in the range
		case r.min <= v.first:
			r.truncTop, r.truncAt = true, r.max+1
			if r.truncAt > v.last {
				v.first, v.last = 0, 0
			} else {
				v.first = r.truncAt
			}
			r.recs = []encoded{encodeRecord(&record{typ: recTruncPrefix, created: g.created, group: g.name, index: r.truncAt})}
		case r.max >= v.last:
			r.truncAt = r.min
			v.last = r.min - 1
			r.recs = []encoded{encodeRecord(&record{typ: recTruncSuffix, created: g.created, group: g.name, index: r.truncAt})}
		default:
			return fmt.Errorf("raftlog: group %s: deleting entries %d-%d from the middle of %d-%d is not supported", g.name, r.min, r.max, v.first, v.last)
		}
	case opState:
	case opDrop:
		v.first, v.last = 0, 0
		r.recs = []encoded{encodeRecord(&record{typ: recDrop, created: g.created, group: g.name})}
	default:
		return fmt.Errorf("raftlog: unknown request %d", r.op)
	}
	return nil
}

// applyAll updates the index for requests whose records are durable at
// the locations at, in order.
func (l *Log) applyAll(reqs []*request, at []loc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	batch := l.nextBatch.Load() - 1
	for _, r := range reqs {
		g := r.g
		g.lastBatch = batch
		switch r.effect {
		case opAppend:
			for k := range r.recs {
				g.appendLoc(r.first+uint64(k), at[i+k])
			}
		case opDelete:
			if r.truncTop {
				g.truncatePrefix(r.truncAt)
				l.collectDue = true
			} else {
				g.truncateSuffix(r.truncAt)
			}
		case opState:
			g.setState(r.key, r.value, at[i])
		case opDrop:
			l.collectDue = true
			g.dropped = true
			g.locs, g.state, g.live = nil, nil, 0
			if l.groups[g.name] == g {
				delete(l.groups, g.name)
			}
		}
		i += len(r.recs)
	}
}

// writeBatch writes recs as one batch, synced, and returns where each
// record went. It rotates to a new segment first when the batch would not
// fit in the active one.
func (l *Log) writeBatch(recs []encoded, groups []string) ([]loc, error) {
	n := 0
	for _, r := range recs {
		n += r.n
	}
	seq := l.nextBatch.Load()
	hdr := encodeBatchHeader(seq, len(recs), groups, n)
	total := int64(len(hdr) + n)
	active := l.active()
	if active == nil || active.sealed ||
		(active.end > segmentHeaderSize && active.end+total > l.opts.SegmentSize) ||
		active.end+total > math.MaxUint32 {
		if err := l.rotate(active); err != nil {
			return nil, l.fail(err)
		}
		active = l.active()
		// The seal took a sequence number.
		seq = l.nextBatch.Load()
		hdr = encodeBatchHeader(seq, len(recs), groups, n)
	}
	if total > math.MaxUint32-segmentHeaderSize {
		return nil, fmt.Errorf("raftlog: a batch of %d bytes is too large", total)
	}
	if int64(cap(l.batchBuf)) < total {
		l.batchBuf = make([]byte, 0, total)
	}
	buf := append(l.batchBuf[:0], hdr...)
	at := make([]loc, len(recs))
	for i, r := range recs {
		at[i] = loc{seg: active.seq, off: uint32(active.end) + uint32(len(buf)), n: uint32(r.n)}
		buf = r.appendTo(buf)
	}
	err := l.write(active, buf)
	if cap(l.batchBuf) > maxKeptBatchBuffer {
		l.batchBuf = nil // a rare large batch: not kept for the next
	}
	if err != nil {
		return nil, l.fail(err)
	}
	l.nextBatch.Store(seq + 1)
	l.stats.batches.Add(1)
	return at, nil
}

// write writes buf at the end of s and syncs it.
func (l *Log) write(s *segment, buf []byte) error {
	if _, err := s.f.WriteAt(buf, s.end); err != nil {
		return fmt.Errorf("write segment %d: %w", s.seq, err)
	}
	start := time.Now()
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync segment %d: %w", s.seq, err)
	}
	if l.opts.OnSync != nil {
		l.opts.OnSync(time.Since(start))
	}
	l.stats.syncs.Add(1)
	l.stats.bytes.Add(uint64(len(buf)))
	l.mu.Lock()
	s.end += int64(len(buf))
	l.mu.Unlock()
	return nil
}

func (l *Log) active() *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[len(l.segs)-1]
}

// rotate seals the active segment (when there is one still open) and
// starts the next. Each step is durable before the next begins, so a
// crash leaves either a sealed last segment (the next is created on the
// next write) or a complete new one; a half-made new segment is a
// temporary file that replay deletes.
func (l *Log) rotate(active *segment) error {
	var seq uint32 = 1
	if active != nil {
		seq = active.seq + 1
		if !active.sealed {
			batch := l.nextBatch.Load()
			seal := encodeRecord(&record{typ: recSeal})
			buf := seal.appendTo(encodeBatchHeader(batch, 1, nil, seal.n))
			if err := l.write(active, buf); err != nil {
				return err
			}
			l.nextBatch.Store(batch + 1)
			l.mu.Lock()
			active.sealed = true
			l.mu.Unlock()
		}
	}
	s, err := l.createSegment(seq, l.nextBatch.Load())
	if err != nil {
		return err
	}
	l.collectDue = true
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return nil
}

// createSegment makes segment seq as a temporary file, preallocated and
// with its header synced, and renames it into place.
func (l *Log) createSegment(seq uint32, firstBatch uint64) (*segment, error) {
	if seq == math.MaxUint32 {
		return nil, errors.New("segment numbers exhausted")
	}
	path := filepath.Join(l.dir, segmentName(seq))
	tmp := path + ".tmp"
	f, err := l.fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		l.fs.Remove(tmp)
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	if err := f.Allocate(l.opts.SegmentSize); err != nil {
		return fail(err)
	}
	hdr := segmentHeader{seq: uint64(seq), size: l.opts.SegmentSize, firstBatch: firstBatch}.encode()
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := l.fs.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	l.stats.syncs.Add(2)
	return &segment{seq: seq, f: f, firstBatch: firstBatch, end: segmentHeaderSize}, nil
}

// writeClosedMark records, durably, where the data of a cleanly closed log
// ends.
func (l *Log) writeClosedMark() error {
	var m closedMark
	if s := l.active(); s != nil {
		m.seg, m.end = s.seq, s.end
	}
	m.nextBatch = l.nextBatch.Load()
	path := filepath.Join(l.dir, closedName)
	tmp := path + ".tmp"
	l.fs.Remove(tmp)
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", closedName, err)
	}
	_, err = f.WriteAt(m.encode(), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.Rename(tmp, path)
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", closedName, err)
	}
	return nil
}
