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
// it rewrites an idle one of those groups at the head of the log (a
// carry), after which the segment goes. The size test bounds the cost: a
// group is rewritten at most once per pass of the log's whole length, and
// at least half of that length is dead. A carry is written one batch at a
// time between the batches of callers, so a large group never holds them
// up for long; a request of the group itself abandons it. Runs in the
// writer goroutine.
func (l *Log) collect() {
	if c := l.carrying; c != nil {
		done, err := l.carryStep(c)
		if err != nil {
			// A group found damaged keeps its segments until it is
			// dropped; a failed write has stopped the log.
			l.log.Warn("node log: rewrite records forward", "group", c.g.name, "err", err)
			l.carrying, l.collectDue = nil, false
			return
		}
		if !done {
			return
		}
		l.carrying = nil
	}
	if !l.collectDue {
		return
	}
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
		for _, g := range pinners {
			if l.nextBatch.Load()-g.lastBatch < idleBatches {
				continue // busy: its own truncations will free the segment
			}
			if c := l.startCarry(g); c != nil {
				l.carrying = c
				return
			}
		}
		l.collectDue = false
		return
	}
}

// idleBatches is how many batches must pass without a record of a group
// before the collector rewrites it.
const idleBatches = 32

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

// carryState is a carry under way: all of a group's live records
// rewritten at the head of the log as carry begin, the entries in order,
// the stable values, carry end. Until the end is durable the index keeps
// pointing at the old records, so a carry cut short (by a crash, or
// abandoned because the group wrote) is simply ignored by replay.
// Carrying the whole group rather than its records in the oldest segment
// keeps a group's entries in log order, so the oldest segment a group
// needs is always the one of its first entry.
type carryState struct {
	g           *group
	first, last uint64
	sizes       []uint32 // of the entries' records
	next        int      // entries written so far
	keys        []string
	values      [][]byte
	at          []loc // where the written entries went
	bytes       uint64
	// budget bounds the next batch: small at first and doubling, so that
	// a carry abandoned early (the group wrote) wasted little.
	budget int
}

// startCarry plans a carry of g, nil when g cannot be carried.
func (l *Log) startCarry(g *group) *carryState {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if g.dropped || g.damaged != nil {
		return nil
	}
	c := &carryState{g: g, first: g.first, last: g.last(), sizes: make([]uint32, len(g.locs)), budget: 64 << 10}
	for i, x := range g.locs {
		c.sizes[i] = x.n
	}
	c.keys = slices.Sorted(maps.Keys(g.state))
	for _, k := range c.keys {
		c.values = append(c.values, g.state[k].value)
	}
	return c
}

// abandonCarry drops the carry under way when r concerns its group.
func (l *Log) abandonCarry(r *request) {
	if c := l.carrying; c != nil && r.g == c.g {
		l.carrying = nil
	}
}

// carryStep writes the next batch of carry c and reports whether it was
// the last; then the index points at the new records.
func (l *Log) carryStep(c *carryState) (done bool, err error) {
	g := c.g
	h := &Group{l: l, g: g}
	var recs []encoded
	pending := 0
	if c.next == 0 && c.at == nil {
		recs = append(recs, encodeRecord(&record{typ: recCarryBegin, created: g.created, group: g.name, index: c.first, term: c.last}))
		pending = recs[0].n
	}
	entries := 0
	for c.next+entries < len(c.sizes) && (entries == 0 || pending+int(c.sizes[c.next+entries]) <= c.budget) {
		index := c.first + uint64(c.next+entries)
		buf, err := h.read(index)
		if err != nil {
			return false, err
		}
		r, err := parseRecord(buf)
		if err != nil || r.index != index || r.group != g.name {
			if err == nil {
				err = fmt.Errorf("record holds %s entry %d", r.group, r.index)
			}
			return false, l.markDamaged(g, fmt.Errorf("entry %d: %w", index, err))
		}
		rc := r.record0()
		rc.typ = recCarried
		rec := encodeRecord(&rc, r.body)
		recs = append(recs, rec)
		pending += rec.n
		entries++
	}
	c.budget = min(2*c.budget, maxBatchBytes)
	first := len(recs) - entries // position of the first entry in recs
	done = c.next+entries == len(c.sizes)
	if done {
		for i, k := range c.keys {
			recs = append(recs, encodeRecord(&record{typ: recState, created: g.created, group: g.name, key: k}, c.values[i]))
		}
		recs = append(recs, encodeRecord(&record{typ: recCarryEnd, created: g.created, group: g.name}))
	}
	at, err := l.writeBatch(recs, []string{g.name})
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		c.bytes += uint64(r.n)
	}
	c.at = append(c.at, at[first:first+entries]...)
	c.next += entries
	if !done {
		return false, nil
	}
	l.mu.Lock()
	if !g.dropped && g.first == c.first && g.last() == c.last {
		for i := range g.locs {
			g.live += int64(c.at[i].n) - int64(g.locs[i].n)
			g.locs[i] = c.at[i]
		}
		for i, k := range c.keys {
			g.setState(k, c.values[i], at[first+entries+i])
		}
	}
	l.mu.Unlock()
	l.stats.carried.Add(c.bytes)
	return true, nil
}

// record0 is r without its body and size, for encoding it again.
func (r *record) record0() record {
	return record{typ: r.typ, created: r.created, group: r.group, index: r.index, term: r.term, logType: r.logType, appendedAt: r.appendedAt, key: r.key}
}
