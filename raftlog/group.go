package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// loc is where a live record is: segment, offset and length. A length of
// zero marks a record that replay found damaged: it stays in the index so
// that the group is known to be damaged while the record is live.
type loc struct {
	seg uint32
	off uint32
	n   uint32
}

func (c loc) bad() bool { return c.n == 0 }

type stateValue struct {
	value []byte
	at    loc
}

// group is the index of one Raft group's records. It changes only in the
// writer goroutine, under Log.mu.
type group struct {
	name    string
	created uint64
	first   uint64 // index of locs[0]
	locs    []loc
	state   map[string]stateValue
	live    int64 // bytes of live records
	damaged error
	dropped bool
	// lastBatch is the batch of the group's last request (the writer's).
	lastBatch uint64
	// pending counts the group's queued appends (StoreLogsQueued) the
	// writer has not answered yet.
	pending atomic.Int64
}

func newGroup(name string, created uint64) *group {
	return &group{name: name, created: created, state: make(map[string]stateValue)}
}

func (g *group) last() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first + uint64(len(g.locs)) - 1
}

func (g *group) hasRecords() bool { return len(g.locs) > 0 || len(g.state) > 0 }

// minSeg is the oldest segment holding a live record of g; ok is false
// when g has none.
func (g *group) minSeg() (seg uint32, ok bool) {
	if len(g.locs) > 0 {
		seg, ok = g.locs[0].seg, true
	}
	for _, v := range g.state {
		if !ok || v.at.seg < seg {
			seg, ok = v.at.seg, true
		}
	}
	return seg, ok
}

// truncatePrefix removes the entries below index.
func (g *group) truncatePrefix(index uint64) {
	if len(g.locs) == 0 || index <= g.first {
		return
	}
	n := min(index-g.first, uint64(len(g.locs)))
	for _, c := range g.locs[:n] {
		g.live -= int64(c.n)
	}
	g.locs = g.locs[n:]
	g.first += n
	if len(g.locs) == 0 {
		g.locs, g.first = nil, 0
	}
}

// truncateSuffix removes the entries from index on.
func (g *group) truncateSuffix(index uint64) {
	if len(g.locs) == 0 || index > g.last() {
		return
	}
	keep := uint64(0)
	if index > g.first {
		keep = index - g.first
	}
	for _, c := range g.locs[keep:] {
		g.live -= int64(c.n)
	}
	g.locs = g.locs[:keep]
	if len(g.locs) == 0 {
		g.locs, g.first = nil, 0
	}
}

func (g *group) appendLoc(index uint64, c loc) {
	if len(g.locs) == 0 {
		g.first = index
	}
	g.locs = append(g.locs, c)
	g.live += int64(c.n)
}

func (g *group) setState(key string, value []byte, c loc) {
	if old, ok := g.state[key]; ok {
		g.live -= int64(old.at.n)
	}
	g.state[key] = stateValue{value: value, at: c}
	g.live += int64(c.n)
}

// Group is one Raft group's view of the node log: its raft.LogStore and
// raft.StableStore. Entries must be stored contiguously (it is a
// raft.MonotonicLogStore): after its log is emptied a group may start
// again at any index.
type Group struct {
	l *Log
	g *group
}

var (
	_ raft.LogStore          = (*Group)(nil)
	_ raft.StableStore       = (*Group)(nil)
	_ raft.MonotonicLogStore = (*Group)(nil)
)

// Group returns the named group's view, creating the group when the log
// has none. A group found damaged is refused with a *DamagedError until it
// is dropped.
func (l *Log) Group(name string) (*Group, error) {
	if name == "" || len(name) > 1<<12 {
		return nil, fmt.Errorf("raftlog: invalid group name %q", name)
	}
	if err := l.failure(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.groups[name]
	if g == nil {
		g = newGroup(name, l.nextBatch.Load())
		l.groups[name] = g
	}
	if g.damaged != nil {
		return nil, &DamagedError{Group: name, Err: g.damaged}
	}
	return &Group{l: l, g: g}, nil
}

// DropGroup deletes every record of the named group: its entries and
// stable state. A group opened again afterwards starts empty.
func (l *Log) DropGroup(name string) error {
	l.mu.RLock()
	g := l.groups[name]
	l.mu.RUnlock()
	if g == nil {
		return nil
	}
	return l.submit(&request{g: g, op: opDrop})
}

// Name is the group's name.
func (g *Group) Name() string { return g.g.name }

// IsMonotonic tells raft that entries are stored without gaps, so it
// empties the log after installing a snapshot instead of leaving a gap.
func (g *Group) IsMonotonic() bool { return true }

// check returns the error every call on a dropped or damaged group gets;
// l.mu held.
func (g *Group) check() error {
	switch {
	case g.g.dropped:
		return ErrDropped
	case g.g.damaged != nil:
		return &DamagedError{Group: g.g.name, Err: g.g.damaged}
	}
	return nil
}

// FirstIndex returns the first index stored, 0 when none.
func (g *Group) FirstIndex() (uint64, error) {
	g.l.mu.RLock()
	defer g.l.mu.RUnlock()
	if err := g.check(); err != nil {
		return 0, err
	}
	return g.g.first, nil
}

// LastIndex returns the last index stored, 0 when none.
func (g *Group) LastIndex() (uint64, error) {
	g.l.mu.RLock()
	defer g.l.mu.RUnlock()
	if err := g.check(); err != nil {
		return 0, err
	}
	return g.g.last(), nil
}

// GetLog reads the entry at index from disk and checks it. A record that
// fails its checks marks the group damaged. An entry queued by
// StoreLogsQueued and not yet written is read once it is.
func (g *Group) GetLog(index uint64, out *raft.Log) error {
	buf, err := g.read(index)
	if errors.Is(err, raft.ErrLogNotFound) && g.g.pending.Load() > 0 && g.WaitDurable(index) == nil {
		buf, err = g.read(index)
	}
	if err != nil {
		return err
	}
	r, err := parseRecord(buf)
	if err == nil && (r.group != g.g.name || r.index != index || r.size != len(buf) || (r.typ != recEntry && r.typ != recCarried)) {
		err = fmt.Errorf("record read for entry %d holds %s entry %d", index, r.group, r.index)
	}
	if err == nil {
		err = r.toLog(out)
	}
	if err != nil {
		return g.l.markDamaged(g.g, fmt.Errorf("entry %d: %w", index, err))
	}
	return nil
}

// read returns the bytes of the record of entry index.
func (g *Group) read(index uint64) ([]byte, error) {
	g.l.mu.RLock()
	defer g.l.mu.RUnlock()
	if err := g.check(); err != nil {
		return nil, err
	}
	if len(g.g.locs) == 0 || index < g.g.first || index > g.g.last() {
		return nil, raft.ErrLogNotFound
	}
	c := g.g.locs[index-g.g.first]
	s := g.l.segmentFor(c.seg)
	if s == nil || c.bad() {
		return nil, fmt.Errorf("raftlog: group %s entry %d: segment %d missing", g.g.name, index, c.seg)
	}
	buf := make([]byte, c.n)
	if _, err := s.f.ReadAt(buf, int64(c.off)); err != nil {
		return nil, fmt.Errorf("raftlog: read group %s entry %d: %w", g.g.name, index, err)
	}
	return buf, nil
}

// StoreLog stores one entry.
func (g *Group) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries, which must follow each other and the last
// stored entry, and returns once they are durable.
func (g *Group) StoreLogs(logs []*raft.Log) error {
	r, err := g.appendRequest(logs)
	if r == nil {
		return err
	}
	return g.l.submit(r)
}

// StoreLogsQueued stores entries as StoreLogs does, but returns once the
// writer has them, before they are durable: for a leader, which may write
// its entries while it replicates them. The entries are durable once
// WaitDurable returns for the last of them; until then LastIndex does not
// count them, reads of them wait, and a failed write fails the log (every
// later call reports it). The group's next requests come after them.
func (g *Group) StoreLogsQueued(logs []*raft.Log) error {
	r, err := g.appendRequest(logs)
	if r == nil {
		return err
	}
	r.queued = true
	return g.l.hand(r)
}

// appendRequest is the request that appends entries which follow each
// other; nil when there are none or they do not follow each other.
func (g *Group) appendRequest(logs []*raft.Log) (*request, error) {
	if len(logs) == 0 {
		return nil, nil
	}
	recs := make([]encoded, len(logs))
	for i, l := range logs {
		if i > 0 && l.Index != logs[i-1].Index+1 {
			return nil, fmt.Errorf("raftlog: group %s: entries %d and %d are not contiguous", g.g.name, logs[i-1].Index, l.Index)
		}
		recs[i] = encodeEntry(g.g.name, g.g.created, l, recEntry)
	}
	return &request{g: g.g, op: opAppend, recs: recs, first: logs[0].Index}, nil
}

// WaitDurable waits until the group's entries through index are durable.
// It fails when the log fails or closes first, when the group is dropped
// or damaged, and when index is past the last entry stored with no append
// of the group still to be written.
func (g *Group) WaitDurable(index uint64) error {
	for {
		// pending is read before the index: the writer updates the index
		// before it answers, so a group with nothing pending has its last
		// append in the index read next.
		pending := g.g.pending.Load()
		g.l.mu.RLock()
		err := g.check()
		last := g.g.last()
		written := g.l.written
		g.l.mu.RUnlock()
		if err == nil && last < index {
			err = g.l.failure()
		}
		switch {
		case err != nil:
			return err
		case last >= index:
			return nil
		case pending == 0:
			return fmt.Errorf("raftlog: group %s: entry %d is not stored (last %d)", g.g.name, index, last)
		}
		select {
		case <-written:
		case <-g.l.done:
			// The writer stopped; its last batch has signalled.
			if g.g.pending.Load() > 0 {
				return g.l.closedError()
			}
		}
	}
}

// DeleteRange deletes the entries from min to max inclusive: a prefix (as
// after a snapshot), a suffix (a conflict with the leader) or everything.
func (g *Group) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return g.l.submit(&request{g: g.g, op: opDelete, min: min, max: max})
}

// Set stores a stable value durably.
func (g *Group) Set(key, val []byte) error {
	if len(key) > 1<<12 {
		return fmt.Errorf("raftlog: group %s: key of %d bytes is too long", g.g.name, len(key))
	}
	v := append([]byte(nil), val...)
	rec := encodeRecord(&record{typ: recState, created: g.g.created, group: g.g.name, key: string(key)}, v)
	return g.l.submit(&request{g: g.g, op: opState, recs: []encoded{rec}, key: string(key), value: v})
}

// Get returns a stable value, or ErrNotFound.
func (g *Group) Get(key []byte) ([]byte, error) {
	g.l.mu.RLock()
	defer g.l.mu.RUnlock()
	if err := g.check(); err != nil {
		return nil, err
	}
	v, ok := g.g.state[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v.value...), nil
}

// SetUint64 stores a stable number.
func (g *Group) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return g.Set(key, b[:])
}

// GetUint64 returns a stable number, or 0 and ErrNotFound.
func (g *Group) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: group %s: value of %q is %d bytes, not a number", g.g.name, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// IsDamaged reports whether err says a group is damaged.
func IsDamaged(err error) bool {
	var d *DamagedError
	return errors.As(err, &d)
}
