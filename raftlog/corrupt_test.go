package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// onDisk is one record as it lies in a segment file.
type onDisk struct {
	path      string
	off, size int
	hlen      int
	rec       record
	batchOff  int // offset of its batch
	batchSeq  uint64
	lastBatch bool // in the last batch of the last segment
}

// layout parses the segment files of a log the tests wrote.
func layout(t testing.TB, dir string) []onDisk {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	sort.Strings(names)
	var out []onDisk
	for si, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		pos := segmentHeaderSize
		for pos < len(data) {
			h, ok := parseBatchHeader(data[pos:])
			if !ok {
				break
			}
			for p := pos + h.size; p < pos+h.total; {
				r, err := parseRecord(data[p : pos+h.total])
				if err != nil {
					t.Fatalf("layout: %s at %d: %v", name, p, err)
				}
				out = append(out, onDisk{path: name, off: p, size: r.size, hlen: int(le.Uint32(data[p:])), rec: r,
					batchOff: pos, batchSeq: h.seq})
				p += r.size
			}
			pos += h.total
		}
		if si == len(names)-1 {
			for i := len(out) - 1; i >= 0 && out[i].path == name && out[i].batchOff == out[len(out)-1].batchOff; i-- {
				out[i].lastBatch = true
			}
		}
	}
	return out
}

func patch(t testing.TB, path string, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}

func flip(t testing.TB, path string, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	patch(t, path, off, []byte{data[off] ^ 0x10})
}

// corruptionFixture writes a log of three groups over several sealed
// segments: a and b take turns (b's first entries are truncated away by
// the time it closes), c writes once and goes idle, then d is created.
// It returns the directory, closed cleanly.
func corruptionFixture(t testing.TB) string {
	dir := t.TempDir()
	// No syncs (faultFS without a fault): the files are what matters.
	l := openLog(t, dir, Options{SegmentSize: 4 << 10, RetainBytes: 1 << 30, FS: &faultFS{}})
	a, b, c := openGroup(t, l, "a"), openGroup(t, l, "b"), openGroup(t, l, "c")
	store(t, c, 1, 2, 1, 50)
	if err := c.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 60; i++ {
		store(t, a, i, i, 1, 200)
		store(t, b, i, i, 1, 200)
	}
	if err := b.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	d := openGroup(t, l, "d")
	store(t, d, 1, 3, 1, 50)
	for i := uint64(61); i <= 65; i++ {
		store(t, a, i, i, 1, 200)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func damagedGroups(r Recovery) []string {
	var out []string
	for g := range r.Damaged {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// pick returns the first record on disk that matches.
func pick(t *testing.T, recs []onDisk, match func(onDisk) bool) onDisk {
	t.Helper()
	for _, r := range recs {
		if match(r) {
			return r
		}
	}
	t.Fatal("no record on disk matches")
	return onDisk{}
}

func firstSegment(r onDisk) bool { return strings.HasSuffix(r.path, segmentName(1)) }

func TestCorruptionIsClassified(t *testing.T) {
	cases := []struct {
		name        string
		corrupt     func(t *testing.T, dir string, recs []onDisk)
		damaged     []string
		unknownLoss bool
	}{
		{"a bit flip in an entry body damages its group alone", func(t *testing.T, dir string, recs []onDisk) {
			r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "a" && r.rec.typ == recEntry && r.rec.index == 5 })
			flip(t, r.path, r.off+r.size-3)
		}, []string{"a"}, false},
		{"a bit flip in a stable value damages its group", func(t *testing.T, dir string, recs []onDisk) {
			r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "c" && r.rec.typ == recState })
			flip(t, r.path, r.off+r.size-1)
		}, []string{"c"}, false},
		{"a bit flip in an entry truncated away since damages nothing", func(t *testing.T, dir string, recs []onDisk) {
			r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "b" && r.rec.typ == recEntry && r.rec.index == 3 })
			flip(t, r.path, r.off+r.size-3)
		}, nil, false},
		{"a bit flip in a record header damages the groups of its batch", func(t *testing.T, dir string, recs []onDisk) {
			r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "b" && r.rec.typ == recEntry && r.rec.index == 20 })
			flip(t, r.path, r.off+recordFrameSize+3)
		}, []string{"b"}, false},
		{"a bit flip in a batch header damages every group created before it", func(t *testing.T, dir string, recs []onDisk) {
			r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "b" && r.rec.typ == recEntry && r.rec.index == 20 })
			flip(t, r.path, r.batchOff+batchFrameSize+5)
		}, []string{"a", "b", "c"}, true},
		{"a zeroed block in a sealed segment", func(t *testing.T, dir string, recs []onDisk) {
			patch(t, recs[0].path, 1024, make([]byte, 1024))
		}, []string{"a", "b", "c"}, true},
		{"a sealed segment cut short", func(t *testing.T, dir string, recs []onDisk) {
			if err := os.Truncate(recs[0].path, 2000); err != nil {
				t.Fatal(err)
			}
		}, []string{"a", "b", "c"}, true},
		{"the last segment cut short after a clean close", func(t *testing.T, dir string, recs []onDisk) {
			last := recs[len(recs)-1]
			if err := os.Truncate(last.path, int64(last.off)); err != nil {
				t.Fatal(err)
			}
		}, []string{"a", "b", "c", "d"}, true},
		{"a bit flip in the last batch after a clean close is damage, not a torn write", func(t *testing.T, dir string, recs []onDisk) {
			last := recs[len(recs)-1]
			flip(t, last.path, last.off+last.size-2)
		}, []string{"a"}, false},
		{"the last batch zeroed after a clean close", func(t *testing.T, dir string, recs []onDisk) {
			last := recs[len(recs)-1]
			patch(t, last.path, last.batchOff, make([]byte, last.off+last.size-last.batchOff))
		}, []string{"a", "b", "c", "d"}, true},
		{"a bit flip in a segment header loses nothing", func(t *testing.T, dir string, recs []onDisk) {
			flip(t, recs[0].path, 20)
		}, nil, false},
		{"damage in the last whole batch followed by a write cut short, after a crash", func(t *testing.T, dir string, recs []onDisk) {
			os.Remove(filepath.Join(dir, closedName))
			last := recs[len(recs)-1]
			flip(t, last.path, last.off+last.size-2)
			// The next write got a few bytes out before the crash, not
			// even a whole batch header: the damaged batch was not the
			// last write, so it had been synced.
			patch(t, last.path, last.off+last.size, []byte("RBLOG"))
		}, []string{"a"}, false},
		{"damage in the last segment followed by valid batches, after a crash", func(t *testing.T, dir string, recs []onDisk) {
			os.Remove(filepath.Join(dir, closedName))
			last := recs[len(recs)-1]
			r := pick(t, recs, func(r onDisk) bool {
				return r.path == last.path && !r.lastBatch && r.rec.group == "a" && r.rec.typ == recEntry
			})
			flip(t, r.path, r.off+r.size-2)
		}, []string{"a"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := corruptionFixture(t)
			recs := layout(t, dir)
			if len(recs) == 0 || !firstSegment(recs[0]) {
				t.Fatal("fixture has no first segment")
			}
			tc.corrupt(t, dir, recs)
			l := openLog(t, dir, Options{SegmentSize: 4 << 10, RetainBytes: 1 << 30})
			rec := l.Recovery()
			if got := damagedGroups(rec); !slices.Equal(got, tc.damaged) {
				t.Fatalf("damaged groups %v, want %v (%v)", got, tc.damaged, rec.Damaged)
			}
			if rec.Unattributed != tc.unknownLoss {
				t.Fatalf("unattributed loss %v, want %v", rec.Unattributed, tc.unknownLoss)
			}
			// Damaged groups are refused; the others read back in full.
			for _, name := range tc.damaged {
				if _, err := l.Group(name); !IsDamaged(err) {
					t.Fatalf("damaged group %s opened: %v", name, err)
				}
			}
			want := map[string][3]uint64{"a": {1, 65, 200}, "b": {11, 60, 200}, "c": {1, 2, 50}, "d": {1, 3, 50}}
			for name, w := range want {
				if slices.Contains(tc.damaged, name) {
					continue
				}
				checkRange(t, openGroup(t, l, name), w[0], w[1], int(w[2]))
			}
		})
	}
}

func TestTornLastBatchAfterACrashIsRepaired(t *testing.T) {
	for _, tear := range []string{"zeroed", "garbage", "header lost", "cut short by zeros"} {
		t.Run(tear, func(t *testing.T) {
			dir := corruptionFixture(t)
			// A crash: no mark of a clean close.
			os.Remove(filepath.Join(dir, closedName))
			recs := layout(t, dir)
			last := recs[len(recs)-1]
			start, end := last.batchOff, last.off+last.size
			switch tear {
			case "zeroed":
				patch(t, last.path, start+(end-start)/2, make([]byte, 40))
			case "garbage":
				patch(t, last.path, start+30, []byte("a page the disk never wrote, filled with something else"))
			case "header lost":
				patch(t, last.path, start, make([]byte, 20))
			case "cut short by zeros":
				patch(t, last.path, end-5, make([]byte, 5))
			}
			l := openLog(t, dir, Options{SegmentSize: 4 << 10, RetainBytes: 1 << 30})
			rec := l.Recovery()
			if len(rec.Damaged) > 0 || rec.Unattributed || rec.TornBytes == 0 {
				t.Fatalf("recovery %+v: want a repaired torn tail", rec)
			}
			// The torn batch was a's entry 65: gone, the rest intact.
			checkRange(t, openGroup(t, l, "a"), 1, 64, 200)
			checkRange(t, openGroup(t, l, "b"), 11, 60, 200)
			a := openGroup(t, l, "a")
			store(t, a, 65, 66, 2, 200)
			l.Close()
			l = openLog(t, dir, Options{SegmentSize: 4 << 10, RetainBytes: 1 << 30})
			if rec := l.Recovery(); len(rec.Damaged) > 0 || rec.TornBytes != 0 {
				t.Fatalf("after writing over the repaired tail: %+v", rec)
			}
			checkRange(t, openGroup(t, l, "a"), 1, 66, 200)
		})
	}
}

func TestDroppingADamagedGroupClearsTheDamage(t *testing.T) {
	dir := corruptionFixture(t)
	recs := layout(t, dir)
	r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "a" && r.rec.typ == recEntry && r.rec.index == 5 })
	flip(t, r.path, r.off+r.size-3)
	opts := Options{SegmentSize: 4 << 10, RetainBytes: 1 << 30}
	l := openLog(t, dir, opts)
	if _, err := l.Group("a"); !IsDamaged(err) {
		t.Fatalf("damaged group opened: %v", err)
	}
	if err := l.DropGroup("a"); err != nil {
		t.Fatal(err)
	}
	a := openGroup(t, l, "a")
	checkRange(t, a, 0, 0, 200)
	store(t, a, 40, 42, 3, 200)
	l.Close()
	l = openLog(t, dir, opts)
	if rec := l.Recovery(); len(rec.Damaged) > 0 {
		t.Fatalf("damage outlived the drop: %v", rec.Damaged)
	}
	checkRange(t, openGroup(t, l, "a"), 40, 42, 200)
}

func TestAMissingSegmentFailsOpen(t *testing.T) {
	dir := corruptionFixture(t)
	if err := os.Remove(filepath.Join(dir, segmentName(2))); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "segment 2 is missing") {
		t.Fatalf("open: %v", err)
	}
}

func TestDamageFoundOnReadIsReported(t *testing.T) {
	dir := t.TempDir()
	damaged := make(chan string, 1)
	l := openLog(t, dir, Options{OnDamage: func(g string, err error) { damaged <- g }})
	a, b := openGroup(t, l, "a"), openGroup(t, l, "b")
	store(t, a, 1, 5, 1, 100)
	store(t, b, 1, 5, 1, 100)
	recs := layout(t, dir)
	r := pick(t, recs, func(r onDisk) bool { return r.rec.group == "a" && r.rec.index == 3 })
	flip(t, r.path, r.off+r.size-1)

	var e raft.Log
	err := a.GetLog(3, &e)
	if !IsDamaged(err) {
		t.Fatalf("read of a damaged entry: %v", err)
	}
	if g := <-damaged; g != "a" {
		t.Fatalf("damage reported for %s", g)
	}
	if err := a.GetLog(1, &e); !IsDamaged(err) {
		t.Fatalf("a damaged group still serves: %v", err)
	}
	if _, err := l.Group("a"); !IsDamaged(err) {
		t.Fatalf("a damaged group opened: %v", err)
	}
	checkRange(t, b, 1, 5, 100)
	if err := a.StoreLogs(entries("a", 6, 6, 1, 100)); !IsDamaged(err) {
		t.Fatalf("a damaged group took an append: %v", err)
	}
	var d *DamagedError
	if !errors.As(err, &d) || d.Group != "a" {
		t.Fatalf("error %v", err)
	}
}
