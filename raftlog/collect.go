package raftlog

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
)

// collect deletes the segments no group needs any more, oldest first.
// When the oldest segment is still pinned by some groups' live records and
// the log holds more than RetainBytes and more than twice its live bytes,
// it rewrites those groups at the head of the log (one round per call, so
// writes are held up only briefly), after which the segment goes. The
// size test bounds the cost: a group is rewritten at most once per pass
// of the log's whole length, and at least half of that length is dead.
// Runs in the writer goroutine, between batches.
func (l *Log) collect() {
	if !l.collectDue {
		return
	}
	carried := false
	for {
		oldest, pinners, over := l.oldestPinned()
		if oldest == nil {
			l.collectDue = false
			return
		}
		if len(pinners) == 0 {
			if err := l.deleteSegment(oldest); err != nil {
				l.log.Warn("node log: delete segment", "segment", segmentName(oldest.seq), "err", err)
				l.collectDue = false
				return
			}
			continue
		}
		if !over {
			l.collectDue = false
			return
		}
		if carried {
			return // another round at the next batch
		}
		for _, g := range pinners {
			if err := l.carry(g); err != nil {
				// A damaged group keeps its segments until it is
				// dropped; a failed write has stopped the log.
				l.log.Warn("node log: rewrite records forward", "group", g.name, "err", err)
				l.collectDue = false
				return
			}
		}
		carried = true
	}
}

// oldestPinned returns the oldest sealed segment (nil when only the
// active one is left), the groups with live records in it, and whether
// the log is over the size that makes rewriting them worthwhile.
func (l *Log) oldestPinned() (oldest *segment, pinners []*group, over bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) < 2 {
		return nil, nil, false
	}
	oldest = l.segs[0]
	var live, total int64
	for _, g := range l.groups {
		live += g.live
		if seg, ok := g.minSeg(); ok && seg <= oldest.seq {
			pinners = append(pinners, g)
		}
	}
	for _, s := range l.segs {
		total += s.end
	}
	slices.SortFunc(pinners, func(a, b *group) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return oldest, pinners, total > max(l.opts.RetainBytes, 2*live)
}

// deleteSegment removes the oldest segment and makes the removal durable
// before any later one, so segments only ever disappear from the front.
func (l *Log) deleteSegment(s *segment) error {
	l.mu.Lock()
	if len(l.segs) == 0 || l.segs[0] != s {
		l.mu.Unlock()
		return errors.New("not the oldest segment")
	}
	l.segs = l.segs[1:]
	l.mu.Unlock()
	s.f.Close()
	if err := l.fs.Remove(filepath.Join(l.dir, segmentName(s.seq))); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

var errCannotCarry = errors.New("group is damaged or dropped")

// carry rewrites all of g's live records at the head of the log, as a
// carry: begin, the entries in order, the stable values, end. Until the
// end is durable the old records stay where they are, so a carry cut
// short by a crash is simply ignored by replay. Carrying the whole group
// (rather than only its records in the oldest segment) keeps a group's
// entries in log order, so the oldest segment a group needs is always the
// one of its first entry.
func (l *Log) carry(g *group) error {
	l.mu.RLock()
	if g.dropped || g.damaged != nil {
		l.mu.RUnlock()
		return errCannotCarry
	}
	first, last := g.first, g.last()
	sizes := make([]uint32, len(g.locs))
	for i, c := range g.locs {
		sizes[i] = c.n
	}
	keys := slices.Sorted(maps.Keys(g.state))
	values := make([][]byte, len(keys))
	for i, k := range keys {
		values[i] = g.state[k].value
	}
	l.mu.RUnlock()
	h := &Group{l: l, g: g}

	var at []loc
	var carried uint64
	recs := [][]byte{encodeRecord(&record{typ: recCarryBegin, created: g.created, group: g.name, index: first, term: last})}
	pending := len(recs[0])
	flush := func() error {
		w, err := l.writeBatch(recs, []string{g.name})
		if err != nil {
			return err
		}
		at = append(at, w...)
		recs, pending = recs[:0], 0
		return nil
	}
	for i := range sizes {
		if pending > 0 && pending+int(sizes[i]) > maxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		index := first + uint64(i)
		buf, err := h.read(index)
		if err != nil {
			return err
		}
		r, err := parseRecord(buf)
		if err != nil || r.index != index || r.group != g.name {
			if err == nil {
				err = fmt.Errorf("record holds %s entry %d", r.group, r.index)
			}
			return l.markDamaged(g, fmt.Errorf("entry %d: %w", index, err))
		}
		rc := r.record0()
		rc.typ = recCarried
		rec := encodeRecord(&rc, r.body)
		recs = append(recs, rec)
		pending += len(rec)
		carried += uint64(len(rec))
	}
	for i, k := range keys {
		rec := encodeRecord(&record{typ: recState, created: g.created, group: g.name, key: k}, values[i])
		recs = append(recs, rec)
		carried += uint64(len(rec))
	}
	recs = append(recs, encodeRecord(&record{typ: recCarryEnd, created: g.created, group: g.name}))
	if err := flush(); err != nil {
		return err
	}
	// at: begin, the entries, the values, end.
	l.mu.Lock()
	for i := range g.locs {
		c := at[1+i]
		g.live += int64(c.n) - int64(g.locs[i].n)
		g.locs[i] = c
	}
	for i, k := range keys {
		g.setState(k, values[i], at[1+len(sizes)+i])
	}
	l.mu.Unlock()
	l.stats.carried.Add(carried)
	return nil
}

// record0 is r without its body and size, for encoding it again.
func (r *record) record0() record {
	return record{typ: r.typ, created: r.created, group: r.group, index: r.index, term: r.term, logType: r.logType, appendedAt: r.appendedAt, key: r.key}
}
