package raftlog

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Replay reads every segment in order, checks every record and rebuilds
// the index. What it cannot read it classifies:
//
//   - The end of the last segment may hold a torn batch: the write that was
//     under way when the node stopped, never synced, never acknowledged
//     (each batch is synced before the next is written, so only the last
//     can be torn). A damaged last batch with nothing written after it (or,
//     when its own header is unreadable, nothing valid after it), in a
//     last segment that has its full preallocated size, is such a tail: it
//     is zeroed and forgotten.
//   - Anything else is damage. A record whose body fails its checksum
//     damages its group (if the record is still live). A record whose
//     header fails damages the groups the batch header names. A lost batch
//     (its header unreadable, a gap in the batch numbers, a segment cut
//     short, a sealed segment without its seal) damages every group
//     created before it: the groups it held are unknown.
//
// A group is damaged until it is dropped; a group created after a loss
// is not affected by it.

// loss is records lost in batches up to upTo; groups are the groups they
// belonged to, nil when unknown.
type loss struct {
	upTo   uint64
	groups []string
	what   string
}

type replayer struct {
	l      *Log
	groups map[string]*group
	// expected is the sequence number of the next batch, 0 before the
	// first.
	expected uint64
	// unsealed: the previous segment ended without its seal.
	unsealed bool
	// startUnknown: the oldest segment's header is damaged, so where the
	// log begins is unknown (from segment startSeg on).
	startUnknown bool
	startSeg     uint32
	losses       []loss
	lostTail     bool
	// closed is where a cleanly closed log said its data ends; nil after
	// a crash.
	closed *closedMark
	// carries are the carries begun and not yet ended, by group.
	carries map[string]*carryInProgress
	// dropped is the batch of each group's last drop.
	dropped map[string]uint64
	torn    int64
}

func (l *Log) replay() error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("list segments: %w", err)
	}
	var seqs []uint32
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".seg.tmp"):
			// A segment whose creation a crash cut short.
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
				return fmt.Errorf("remove %s: %w", n, err)
			}
		case strings.HasSuffix(n, ".seg"):
			s, err := strconv.ParseUint(strings.TrimSuffix(n, ".seg"), 10, 32)
			if err != nil {
				return fmt.Errorf("%s is not a segment name", n)
			}
			seqs = append(seqs, uint32(s))
		}
	}
	slices.Sort(seqs)
	rp := &replayer{l: l, groups: make(map[string]*group), carries: make(map[string]*carryInProgress), dropped: make(map[string]uint64)}
	hadClosed, err := rp.readClosedMark(names)
	if err != nil {
		return err
	}
	if m := rp.closed; m != nil {
		switch {
		case m.seg == 0 && len(seqs) == 0:
		case len(seqs) == 0 || m.seg > seqs[len(seqs)-1]:
			return fmt.Errorf("the log was closed at segment %d, which is missing: the log cannot be read as a whole", m.seg)
		case m.seg < seqs[len(seqs)-1]:
			rp.closed = nil // written before later segments: not current
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			return fmt.Errorf("segment %d is missing between %d and %d: the log cannot be read as a whole", seqs[i-1]+1, seqs[i-1], seqs[i])
		}
	}
	for i, seq := range seqs {
		if err := rp.segment(seq, i == len(seqs)-1); err != nil {
			return err
		}
	}
	if m := rp.closed; m != nil && rp.expected < m.nextBatch && !rp.lostTail {
		rp.lose(nil, ^uint64(0), fmt.Sprintf("batches from %d on are missing from a log closed at batch %d", rp.expected, m.nextBatch))
	}
	rp.finish()
	if hadClosed {
		// From the next write on, the log is no longer as it was closed.
		if err := l.fs.Remove(filepath.Join(l.dir, closedName)); err != nil {
			return fmt.Errorf("remove %s: %w", closedName, err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("remove %s: %w", closedName, err)
		}
	}
	return nil
}

// readClosedMark reads CLOSED, when there is one; a damaged mark counts as
// none (as after a crash).
func (rp *replayer) readClosedMark(names []string) (found bool, err error) {
	l := rp.l
	if slices.Contains(names, closedName+".tmp") {
		if err := l.fs.Remove(filepath.Join(l.dir, closedName+".tmp")); err != nil {
			return false, fmt.Errorf("remove %s.tmp: %w", closedName, err)
		}
	}
	if !slices.Contains(names, closedName) {
		return false, nil
	}
	f, err := l.fs.OpenRW(filepath.Join(l.dir, closedName))
	if err != nil {
		return false, fmt.Errorf("open %s: %w", closedName, err)
	}
	defer f.Close()
	b := make([]byte, closedSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("read %s: %w", closedName, err)
	}
	if m, ok := parseClosedMark(b[:n]); ok {
		rp.closed = &m
	} else {
		l.log.Warn("node log: the mark of a clean close is damaged; treating the last stop as a crash")
	}
	return true, nil
}

// segment replays one segment file.
func (rp *replayer) segment(seq uint32, last bool) error {
	l := rp.l
	name := segmentName(seq)
	f, err := l.fs.OpenRW(filepath.Join(l.dir, name))
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	s := &segment{seq: seq, f: f}
	l.segs = append(l.segs, s)
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("size of %s: %w", name, err)
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && err != io.EOF {
		return fmt.Errorf("read %s: %w", name, err)
	}
	hdr, herr := parseSegmentHeader(data)
	if herr == nil && hdr.seq != uint64(seq) {
		herr = fmt.Errorf("header names segment %d", hdr.seq)
	}
	if herr == nil && rp.expected != 0 && hdr.firstBatch < rp.expected {
		herr = fmt.Errorf("header says the segment starts at batch %d, before %d", hdr.firstBatch, rp.expected)
	}
	truncated := herr == nil && size < hdr.size
	// In the last segment of a cleanly closed log nothing can be torn.
	closedHere := last && rp.closed != nil && rp.closed.seg == seq
	if herr != nil {
		l.log.Warn("node log: segment header damaged; reading its batches regardless", "segment", name, "err", herr)
		if rp.expected == 0 && !rp.startUnknown {
			// Where the log begins is unknown until a batch is read.
			rp.startUnknown, rp.startSeg = true, seq
		}
	} else {
		s.firstBatch = hdr.firstBatch
		if rp.expected == 0 {
			if rp.startUnknown && hdr.firstBatch > 0 {
				rp.lose(nil, hdr.firstBatch-1, fmt.Sprintf("the batches before segment %d are unreadable", seq))
			}
			rp.startUnknown = false
			rp.expected = hdr.firstBatch
		} else if hdr.firstBatch > rp.expected {
			// Batches missing between the last of the previous segment
			// and the first of this one; the seal of an unsealed
			// previous segment is one of them, and holds no records.
			top := hdr.firstBatch - 1
			if rp.unsealed {
				top--
			}
			if top >= rp.expected {
				rp.lose(nil, top, fmt.Sprintf("batches %d-%d before segment %d are missing", rp.expected, top, seq))
			}
			rp.expected = hdr.firstBatch
		}
	}
	rp.unsealed = false

	pos := segmentHeaderSize
	for pos < len(data) {
		h, ok := parseBatchHeader(data[pos:])
		if ok && (h.seq < rp.expected || pos+h.total > len(data)) {
			ok = false
		}
		if !ok {
			next, nh := findBatch(data, pos+1, rp.expected)
			if next >= 0 {
				if nh.seq > rp.expected {
					rp.lose(nil, nh.seq-1, fmt.Sprintf("batches %d-%d of segment %d are unreadable", rp.expected, nh.seq-1, seq))
				}
				pos = next
				continue
			}
			// Nothing valid after pos in this segment.
			tail := data[pos:]
			switch {
			case !last:
				rp.unsealed = true
			case truncated:
				rp.lose(nil, ^uint64(0), fmt.Sprintf("segment %d is cut short at %d bytes", seq, size))
				rp.lostTail = true
			case closedHere:
				if int64(pos) < rp.closed.end {
					rp.lose(nil, ^uint64(0), fmt.Sprintf("segment %d is unreadable from %d, before the end %d it was closed at", seq, pos, rp.closed.end))
					rp.lostTail = true
				}
			case herr != nil && !allZero(tail):
				rp.lose(nil, ^uint64(0), fmt.Sprintf("segment %d, whose header is damaged, ends in unreadable bytes", seq))
				rp.lostTail = true
			case !allZero(tail):
				if err := rp.repairTail(s, data, pos); err != nil {
					return err
				}
			}
			break
		}
		if rp.expected == 0 {
			if rp.startUnknown && !(seq == rp.startSeg && pos == segmentHeaderSize) && h.seq > 0 {
				rp.lose(nil, h.seq-1, fmt.Sprintf("the batches before batch %d are unreadable", h.seq))
			}
			rp.startUnknown = false
			rp.expected = h.seq
		}
		if h.seq > rp.expected {
			rp.lose(nil, h.seq-1, fmt.Sprintf("batches %d-%d of segment %d are missing", rp.expected, h.seq-1, seq))
		}
		recs, problems, bad := scanBatch(data, pos, h, seq)
		// The last write, torn by a crash: nothing at all was written
		// after it. Bytes after its end, valid or not, mean another write
		// began after it, which happens only once it was synced.
		if (len(problems) > 0 || bad) && last && !truncated && herr == nil && !closedHere && allZero(data[pos+h.total:]) {
			if err := rp.repairTail(s, data, pos); err != nil {
				return err
			}
			break
		}
		rp.losses = append(rp.losses, problems...)
		rp.apply(recs, h.seq)
		rp.expected = h.seq + 1
		pos += h.total
		if len(recs) > 0 && recs[0].typ == recSeal {
			s.sealed = true
			break
		}
	}
	switch {
	case !s.sealed && !last:
		rp.unsealed = true
	case last && !s.sealed && (truncated || (herr != nil && size < segmentHeaderSize) ||
		(closedHere && int64(min(pos, len(data))) < rp.closed.end)):
		// Whatever followed the cut is gone, and how much that was is
		// unknown.
		if !rp.lostTail {
			rp.lose(nil, ^uint64(0), fmt.Sprintf("segment %d is cut short at %d bytes", seq, size))
		}
	}
	s.end = int64(min(pos, len(data)))
	if last && herr != nil {
		// Write no more into a segment whose header is damaged.
		s.sealed = true
	}
	return nil
}

// recordAt is a record read during replay and where it is.
type recordAt struct {
	record
	at  loc
	bad bool // body failed its checksum: only the header is known
}

// scanBatch parses the records of the batch at pos. Records with a bad
// body come back marked bad (and bad is set); a bad header ends the batch
// with a loss of every group the batch names.
func scanBatch(data []byte, pos int, h batchHeader, seg uint32) (recs []recordAt, problems []loss, bad bool) {
	p, end := pos+h.size, pos+h.total
	for p < end {
		r, err := parseRecord(data[p:end])
		switch err {
		case nil:
			recs = append(recs, recordAt{record: r, at: loc{seg: seg, off: uint32(p), n: uint32(r.size)}})
		case errRecordBody:
			recs = append(recs, recordAt{record: r, at: loc{seg: seg, off: uint32(p)}, bad: true})
		default:
			return recs, append(problems, loss{upTo: h.seq, groups: h.groups,
				what: fmt.Sprintf("a record header in batch %d of segment %d is damaged", h.seq, seg)}), bad
		}
		bad = bad || err == errRecordBody
		p += r.size
	}
	if len(recs) != h.records {
		problems = append(problems, loss{upTo: h.seq, groups: h.groups,
			what: fmt.Sprintf("batch %d of segment %d holds %d records, not %d", h.seq, seg, len(recs), h.records)})
	}
	return recs, problems, bad
}

// repairTail zeroes a torn tail from pos, so that what is written there
// next is never mistaken for more of it.
func (rp *replayer) repairTail(s *segment, data []byte, pos int) error {
	end := len(data)
	for end > pos && data[end-1] == 0 {
		end--
	}
	if end > pos {
		if _, err := s.f.WriteAt(make([]byte, end-pos), int64(pos)); err != nil {
			return fmt.Errorf("repair torn tail of segment %d: %w", s.seq, err)
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("repair torn tail of segment %d: %w", s.seq, err)
		}
		rp.torn += int64(end - pos)
		rp.l.log.Info("node log: repaired a torn tail left by a crash", "segment", segmentName(s.seq), "offset", pos, "bytes", end-pos)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (rp *replayer) lose(groups []string, upTo uint64, what string) {
	rp.losses = append(rp.losses, loss{upTo: upTo, groups: groups, what: what})
}

// group returns the current incarnation of a group as of a record of
// incarnation created.
func (rp *replayer) group(name string, created uint64) *group {
	g := rp.groups[name]
	if g == nil || created > g.created {
		// New, or a new incarnation whose drop was lost.
		g = newGroup(name, created)
		rp.groups[name] = g
	} else if created < g.created && g.damaged == nil {
		g.damaged = fmt.Errorf("a record of an earlier incarnation follows the current one")
	}
	return g
}

// carryInProgress is a carry read so far: its range and the entries seen.
type carryInProgress struct {
	first, last uint64
	locs        []loc
}

// apply replays the records of one batch.
func (rp *replayer) apply(recs []recordAt, batch uint64) {
	for _, r := range recs {
		if r.typ == recSeal {
			continue
		}
		g := rp.group(r.group, r.created)
		cp := rp.carries[r.group]
		switch r.typ {
		case recCarryBegin, recCarried, recCarryEnd, recState:
		default:
			// A carry the collector did not finish (the process
			// stopped): the group's own records go on after it.
			delete(rp.carries, r.group)
		}
		switch r.typ {
		case recEntry:
			if n := len(g.locs); n > 0 && r.index != g.last()+1 {
				setDamage(g, fmt.Errorf("entry %d follows entry %d", r.index, g.last()))
				continue
			}
			g.appendLoc(r.index, r.at)
		case recCarryBegin:
			rp.carries[r.group] = &carryInProgress{first: r.index, last: r.term}
		case recCarried:
			if cp == nil || r.index != cp.first+uint64(len(cp.locs)) {
				setDamage(g, fmt.Errorf("carried entry %d out of place", r.index))
				delete(rp.carries, r.group)
				continue
			}
			cp.locs = append(cp.locs, r.at)
		case recCarryEnd:
			if cp == nil {
				continue
			}
			delete(rp.carries, r.group)
			if n := uint64(len(cp.locs)); (cp.last == 0 && n != 0) || (cp.last != 0 && n != cp.last-cp.first+1) {
				setDamage(g, fmt.Errorf("a carry of entries %d-%d holds %d", cp.first, cp.last, n))
				continue
			}
			g.truncateSuffix(0)
			for i, c := range cp.locs {
				g.appendLoc(cp.first+uint64(i), c)
			}
		case recState:
			var v []byte
			if !r.bad {
				v = append([]byte(nil), r.body...)
			}
			g.setState(r.key, v, r.at)
		case recTruncPrefix:
			g.truncatePrefix(r.index)
		case recTruncSuffix:
			g.truncateSuffix(r.index)
		case recDrop:
			delete(rp.groups, r.group)
			rp.dropped[r.group] = batch
		}
	}
}

func setDamage(g *group, err error) {
	if g.damaged == nil {
		g.damaged = err
	}
}

// finish turns what replay found into the index and the recovery report.
func (rp *replayer) finish() {
	l := rp.l
	rec := Recovery{Damaged: make(map[string]error), TornBytes: rp.torn, Clean: rp.closed != nil}
	// A group named by a loss that has no record left was not dropped
	// since: every record it had may have been in the loss.
	for _, ls := range rp.losses {
		for _, name := range ls.groups {
			if rp.groups[name] == nil && rp.dropped[name] < ls.upTo {
				g := newGroup(name, 0)
				g.damaged = fmt.Errorf("records lost: %s", ls.what)
				rp.groups[name] = g
			}
		}
	}
	for name, g := range rp.groups {
		for i, c := range g.locs {
			if c.bad() {
				setDamage(g, fmt.Errorf("entry %d fails its checksum", g.first+uint64(i)))
				break
			}
		}
		for k, v := range g.state {
			if v.at.bad() {
				setDamage(g, fmt.Errorf("stable value %q fails its checksum", k))
			}
		}
		for _, ls := range rp.losses {
			if g.created > ls.upTo {
				continue
			}
			if ls.groups == nil || slices.Contains(ls.groups, name) {
				setDamage(g, fmt.Errorf("records lost: %s", ls.what))
			}
		}
		if g.damaged != nil {
			rec.Damaged[name] = g.damaged
			l.log.Error("node log: group damaged", "group", name, "err", g.damaged)
		}
	}
	for _, ls := range rp.losses {
		if ls.groups == nil {
			rec.Unattributed = true
			l.log.Error("node log: records of unknown groups lost", "what", ls.what)
		}
	}
	l.groups = rp.groups
	next := rp.expected
	if next == 0 {
		next = 1
	}
	l.nextBatch.Store(next)
	l.recovery = rec
}
