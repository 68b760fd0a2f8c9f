package raftlog

import (
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
)

func TestIdleGroupDoesNotPinSegments(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, RetainBytes: 16 << 10}
	dir := t.TempDir()
	l := openLog(t, dir, opts)
	idle, busy := openGroup(t, l, "idle"), openGroup(t, l, "busy")
	store(t, idle, 1, 3, 1, 100)
	if err := idle.SetUint64([]byte("CurrentTerm"), 5); err != nil {
		t.Fatal(err)
	}
	// busy snapshots every 50 entries and keeps 20, as raft does with
	// its trailing logs; idle never writes again.
	first, most := uint64(1), 0
	for i := uint64(1); i <= 2000; i++ {
		store(t, busy, i, i, 1, 100)
		if i%50 == 0 {
			if err := busy.DeleteRange(first, i-20); err != nil {
				t.Fatal(err)
			}
			first = i - 19
		}
		most = max(most, l.Stats().Segments)
	}
	s := l.Stats()
	t.Logf("%+v; at most %d segments", s, most)
	// About 400 KiB went through the log; what is live is ~12 KiB. Kept:
	// RetainBytes or twice the live bytes, plus the segment being filled.
	if most > 10 {
		t.Fatalf("the log grew to %d segments of 4 KiB: the idle group pins them", most)
	}
	if s.CarriedBytes == 0 {
		t.Fatal("nothing was rewritten forward")
	}
	if s.CarriedBytes > s.BytesWritten/4 {
		t.Fatalf("rewriting cost %d of %d bytes written", s.CarriedBytes, s.BytesWritten)
	}
	l.Close()
	l = openLog(t, dir, opts)
	if rec := l.Recovery(); len(rec.Damaged) > 0 {
		t.Fatalf("damage: %v", rec.Damaged)
	}
	idle = openGroup(t, l, "idle")
	checkRange(t, idle, 1, 3, 100)
	if v, err := idle.GetUint64([]byte("CurrentTerm")); v != 5 || err != nil {
		t.Fatalf("the idle group's term: %d, %v", v, err)
	}
	checkRange(t, openGroup(t, l, "busy"), first, 2000, 100)
}

func TestDroppedGroupFreesItsSegments(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, RetainBytes: 16 << 10}
	dir := t.TempDir()
	l := openLog(t, dir, opts)
	small, big := openGroup(t, l, "small"), openGroup(t, l, "big")
	store(t, small, 1, 2, 1, 50)
	for i := uint64(1); i <= 200; i++ {
		store(t, big, i, i, 1, 500)
	}
	if s := l.Stats(); s.Segments < 20 {
		t.Fatalf("only %d segments", s.Segments)
	}
	if err := l.DropGroup("big"); err != nil {
		t.Fatal(err)
	}
	// The collector carries the small group forward on its own, a batch
	// at a time while no caller waits, and deletes what is freed.
	await.Until(t, 10*time.Second, "at most 2 segments left after dropping the group that filled them", func() bool {
		return l.Stats().Segments <= 2
	})
	store(t, small, 3, 3, 1, 50)
	l.Close()
	l = openLog(t, dir, opts)
	checkRange(t, openGroup(t, l, "small"), 1, 3, 50)
	checkRange(t, openGroup(t, l, "big"), 0, 0, 50)
}

// TestCarryOfAGroupThatWritesNowAndThen: a large group that pins old
// segments but writes again every so often has its carries abandoned and
// started again; whatever happens, its records stay whole.
func TestCarryOfAGroupThatWritesNowAndThen(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, RetainBytes: 16 << 10}
	dir := t.TempDir()
	l := openLog(t, dir, opts)
	big, busy := openGroup(t, l, "big"), openGroup(t, l, "busy")
	for i := uint64(1); i <= 150; i++ {
		store(t, big, i, i, 1, 500)
	}
	first, bigLast := uint64(1), uint64(150)
	for i := uint64(1); i <= 3000; i++ {
		store(t, busy, i, i, 1, 100)
		if i%50 == 0 {
			if err := busy.DeleteRange(first, i-20); err != nil {
				t.Fatal(err)
			}
			first = i - 19
		}
		if i%97 == 0 {
			bigLast++
			store(t, big, bigLast, bigLast, 1, 500)
		}
	}
	s := l.Stats()
	t.Logf("%+v", s)
	if s.CarriedBytes == 0 {
		t.Fatal("the large group was never carried")
	}
	checkRange(t, big, 1, bigLast, 500)
	l.Close()
	l = openLog(t, dir, opts)
	if rec := l.Recovery(); len(rec.Damaged) > 0 {
		t.Fatalf("damage: %v", rec.Damaged)
	}
	checkRange(t, openGroup(t, l, "big"), 1, bigLast, 500)
	checkRange(t, openGroup(t, l, "busy"), first, 3000, 100)
}
