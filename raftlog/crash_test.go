package raftlog

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// model is what a group must hold: its entries (by index, their terms)
// and stable numbers.
type model struct {
	first, last uint64
	terms       map[uint64]uint64
	state       map[string]uint64
}

func (m model) clone() model {
	return model{first: m.first, last: m.last, terms: maps.Clone(m.terms), state: maps.Clone(m.state)}
}

const crashEntrySize = 40

// check compares group name in l with m; it returns a description of the
// first difference, "" when they agree.
func (m model) diff(l *Log, name string) string {
	g, err := l.Group(name)
	if err != nil {
		return err.Error()
	}
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	if first != m.first || last != m.last {
		return fmt.Sprintf("holds %d-%d, want %d-%d", first, last, m.first, m.last)
	}
	for i := first; i <= last && last > 0; i++ {
		var e raft.Log
		if err := g.GetLog(i, &e); err != nil {
			return fmt.Sprintf("entry %d: %v", i, err)
		}
		if e.Term != m.terms[i] || !bytes.Equal(e.Data, payload(name, i, crashEntrySize)) {
			return fmt.Sprintf("entry %d is %d/%q, want term %d", i, e.Term, e.Data, m.terms[i])
		}
	}
	for k, v := range m.state {
		got, err := g.GetUint64([]byte(k))
		if err != nil || got != v {
			return fmt.Sprintf("%s = %d, %v; want %d", k, got, err, v)
		}
	}
	return ""
}

// crashWorkload drives groups through appends, both truncations, stable
// values, a drop, rotations and (with an idle group pinning old segments)
// records rewritten forward, keeping the model of what was acknowledged.
// It stops at the first error and reports the operation under way: the
// group it concerned and that group's model had it succeeded.
type crashWorkload struct {
	models      map[string]model
	pending     string
	pendingWant model
}

func newCrashWorkload() *crashWorkload {
	return &crashWorkload{models: map[string]model{}}
}

func (w *crashWorkload) run(l *Log) error {
	groups := map[string]*Group{}
	get := func(name string) (*Group, error) {
		if g := groups[name]; g != nil {
			return g, nil
		}
		g, err := l.Group(name)
		groups[name] = g
		return g, err
	}
	m := func(name string) model {
		mm, ok := w.models[name]
		if !ok {
			mm = model{terms: map[uint64]uint64{}, state: map[string]uint64{}}
		}
		return mm.clone()
	}
	// op runs one call against group name; want is the group's model if
	// it succeeds.
	op := func(name string, want model, call func(g *Group) error) error {
		g, err := get(name)
		if err != nil {
			return err
		}
		w.pending, w.pendingWant = name, want
		if err := call(g); err != nil {
			return err
		}
		w.models[name] = want
		w.pending = ""
		return nil
	}
	appendTo := func(name string, n int, term uint64) error {
		want := m(name)
		from := want.last + 1
		if want.last == 0 {
			from = 1
			want.first = 1
		}
		want.last = from + uint64(n) - 1
		for i := from; i <= want.last; i++ {
			want.terms[i] = term
		}
		return op(name, want, func(g *Group) error { return g.StoreLogs(entries(name, from, want.last, term, crashEntrySize)) })
	}
	for i := uint64(1); i <= 40; i++ {
		if err := appendTo("a", 1, 1); err != nil {
			return err
		}
		if i%4 == 0 {
			want := m("a")
			want.state["CurrentTerm"] = i
			if err := op("a", want, func(g *Group) error { return g.SetUint64([]byte("CurrentTerm"), i) }); err != nil {
				return err
			}
		}
		if i%6 == 0 { // a snapshot: keep three entries
			want := m("a")
			from, to := want.first, want.last-3
			for k := from; k <= to; k++ {
				delete(want.terms, k)
			}
			want.first = to + 1
			if err := op("a", want, func(g *Group) error { return g.DeleteRange(from, to) }); err != nil {
				return err
			}
		}
		if i%5 == 0 {
			if err := appendTo("b", 2, 1); err != nil {
				return err
			}
		}
		if i%15 == 0 { // a conflict: the last two entries replaced in a new term
			want := m("b")
			from, to := want.last-1, want.last
			delete(want.terms, from)
			delete(want.terms, to)
			want.last = from - 1
			if err := op("b", want, func(g *Group) error { return g.DeleteRange(from, to) }); err != nil {
				return err
			}
			if err := appendTo("b", 2, i); err != nil {
				return err
			}
		}
		if i <= 2 { // c goes idle and pins the oldest segments
			if err := appendTo("c", 1, 1); err != nil {
				return err
			}
			want := m("c")
			want.state["CurrentTerm"] = 7
			if err := op("c", want, func(g *Group) error { return g.SetUint64([]byte("CurrentTerm"), 7) }); err != nil {
				return err
			}
		}
		if i == 10 {
			if err := appendTo("d", 3, 1); err != nil {
				return err
			}
		}
		if i == 20 {
			w.pending, w.pendingWant = "d", model{terms: map[uint64]uint64{}, state: map[string]uint64{}}
			if err := l.DropGroup("d"); err != nil {
				return err
			}
			delete(w.models, "d")
			delete(groups, "d")
			w.pending = ""
		}
		if i == 25 {
			if err := appendTo("d", 2, 2); err != nil {
				return err
			}
		}
	}
	return nil
}

var crashOptions = Options{SegmentSize: 1024, RetainBytes: 2048}

// crashOptionsOn are crashOptions on the file system fs (nil: the real one).
func crashOptionsOn(fs FS) Options {
	opts := crashOptions
	if fs != nil {
		opts.FS = fs
	}
	return opts
}

// runOn runs the workload on the log in dir on fs (nil: the real file
// system) and closes it, returning the first error.
func (w *crashWorkload) runOn(dir string, fs FS) error {
	l, err := Open(dir, crashOptionsOn(fs))
	if err != nil {
		return err
	}
	err = w.run(l)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return err
}

// verify reopens the log in dir with the real file system and checks it
// against w: no damage, every group as acknowledged (the one whose
// operation was cut may hold either state), and the log goes on working.
func (w *crashWorkload) verify(t *testing.T, dir, what string) {
	t.Helper()
	w.verifyOn(t, dir, nil, what)
}

// verifyOn is verify on the file system fs (nil: the real one).
func (w *crashWorkload) verifyOn(t *testing.T, dir string, fs FS, what string) {
	t.Helper()
	l, err := Open(dir, crashOptionsOn(fs))
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer l.Close()
	if rec := l.Recovery(); len(rec.Damaged) > 0 || rec.Unattributed {
		t.Fatalf("%s: a crash was taken for damage: %+v", what, rec)
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		want, ok := w.models[name]
		if !ok {
			want = model{}
		}
		d := want.diff(l, name)
		if d != "" && name == w.pending {
			if d2 := w.pendingWant.diff(l, name); d2 == "" {
				d = ""
			} else {
				d = fmt.Sprintf("%s (or, with the cut operation done, %s)", d, d2)
			}
		}
		if d != "" {
			t.Fatalf("%s: group %s %s", what, name, d)
		}
	}
	g, err := l.Group("a")
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	last, _ := g.LastIndex()
	if err := g.StoreLogs(entries("a", last+1, last+1, 9, crashEntrySize)); err != nil {
		t.Fatalf("%s: append after recovery: %v", what, err)
	}
}

// TestCrashAtEveryStep runs the workload once to count the file system
// operations it makes, then again with a crash at each of them in turn
// (writes cut at their start, middle and last byte, renames and removals
// both before and after they happen), and checks that the log reopens
// without damage and with everything acknowledged. The workload rotates
// segments, seals them, rewrites an idle group's records forward,
// deletes segments, truncates both ends of logs and drops a group, so
// every phase of each is cut somewhere.
func TestCrashAtEveryStep(t *testing.T) {
	dry := &faultFS{}
	dir := t.TempDir()
	l, err := Open(dir, crashOptionsOn(dry))
	if err != nil {
		t.Fatal(err)
	}
	w := newCrashWorkload()
	if err := w.run(l); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.CarriedBytes == 0 {
		t.Fatalf("the workload rewrote nothing forward (%+v): the test misses that phase", s)
	}
	kinds := dry.kinds
	count := map[string]int{}
	for _, k := range kinds {
		count[k]++
	}
	t.Logf("%d operations: %v", len(kinds), count)
	w.verify(t, dir, "no crash")

	for at := 1; at <= len(kinds); at++ {
		type variant struct {
			cut     int
			applied bool
		}
		variants := []variant{{0, false}, {0, true}}
		if kinds[at-1] == "write" {
			variants = []variant{{0, false}, {7, false}, {-1, false}, {1 << 30, false}}
		}
		for _, v := range variants {
			what := fmt.Sprintf("crash at operation %d (%s, cut %d, applied %v)", at, kinds[at-1], v.cut, v.applied)
			dir := filepath.Join(t.TempDir(), "log")
			w := newCrashWorkload()
			if err := w.runOn(dir, &faultFS{failAt: at, cut: v.cut, applied: v.applied}); err == nil {
				t.Fatalf("%s: the workload did not notice", what)
			}
			w.verify(t, dir, what)
			os.RemoveAll(dir)
		}
	}
}

// TestTornWriteAtEveryOffset cuts the last write before a crash after
// every possible number of bytes: the log reopens without damage, with
// everything written before, and with the cut batch either absent or (cut
// after its last byte, before its sync) whole.
func TestTornWriteAtEveryOffset(t *testing.T) {
	workload := func(l *Log) error {
		a, err := l.Group("a")
		if err != nil {
			return err
		}
		b, err := l.Group("b")
		if err != nil {
			return err
		}
		if err := a.StoreLogs(entries("a", 1, 3, 1, 30)); err != nil {
			return err
		}
		if err := b.SetUint64([]byte("CurrentTerm"), 4); err != nil {
			return err
		}
		// The batch that is torn: three entries.
		return a.StoreLogs(entries("a", 4, 6, 1, 30))
	}
	dry := &faultFS{}
	dir := t.TempDir()
	l, err := Open(dir, Options{FS: dry, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := workload(l); err != nil {
		t.Fatal(err)
	}
	l.Close()
	op := 0
	for i, k := range dry.kinds {
		if k == "write" && dry.sizes[i] > closedSize {
			op = i + 1 // the last batch written before the close
		}
	}
	size := dry.sizes[op-1]
	for cut := 0; cut <= size; cut++ {
		dir := filepath.Join(t.TempDir(), "log")
		l, err := Open(dir, Options{FS: &faultFS{failAt: op, cut: cut}, SegmentSize: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := workload(l); err == nil {
			t.Fatalf("cut at %d: the write did not fail", cut)
		}
		l.Close()
		l, err = Open(dir, Options{FS: &faultFS{}, SegmentSize: 64 << 10}) // no fault, no syncs: fast
		if err != nil {
			t.Fatalf("cut at %d: reopen: %v", cut, err)
		}
		rec := l.Recovery()
		if len(rec.Damaged) > 0 || rec.Unattributed {
			t.Fatalf("cut at %d of %d: a torn write taken for damage: %+v", cut, size, rec)
		}
		last := uint64(3)
		if cut == size {
			last = 6
		}
		checkRange(t, openGroup(t, l, "a"), 1, last, 30)
		if v, err := openGroup(t, l, "b").GetUint64([]byte("CurrentTerm")); v != 4 || err != nil {
			t.Fatalf("cut at %d: term %d, %v", cut, v, err)
		}
		l.Close()
		os.RemoveAll(dir)
	}
}
