package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/internal/await"
)

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func openGroup(t testing.TB, l *Log, name string) *Group {
	t.Helper()
	g, err := l.Group(name)
	if err != nil {
		t.Fatalf("group %s: %v", name, err)
	}
	return g
}

// payload is the data of entry index of a group in these tests.
func payload(group string, index uint64, size int) []byte {
	// No zero bytes: a write cut short must not look whole because its
	// missing end was zeros anyway.
	b := bytes.Repeat([]byte{byte(index) | 1, byte(index>>8) | 0x80}, size/2+1)[:size]
	return append([]byte(fmt.Sprintf("%s/%d:", group, index)), b...)
}

func entries(group string, from, to, term uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: payload(group, i, size),
			AppendedAt: time.Unix(1700000000, int64(i))})
	}
	return out
}

func store(t testing.TB, g *Group, from, to, term uint64, size int) {
	t.Helper()
	if err := g.StoreLogs(entries(g.Name(), from, to, term, size)); err != nil {
		t.Fatalf("store %s %d-%d: %v", g.Name(), from, to, err)
	}
}

// checkRange asserts that g holds exactly entries first..last as the
// helpers wrote them.
func checkRange(t testing.TB, g *Group, first, last uint64, size int) {
	t.Helper()
	f, _ := g.FirstIndex()
	l, _ := g.LastIndex()
	if f != first || l != last {
		t.Fatalf("group %s holds %d-%d, want %d-%d", g.Name(), f, l, first, last)
	}
	for i := first; i <= last && last > 0; i++ {
		var e raft.Log
		if err := g.GetLog(i, &e); err != nil {
			t.Fatalf("group %s entry %d: %v", g.Name(), i, err)
		}
		if e.Index != i || !bytes.Equal(e.Data, payload(g.Name(), i, size)) || e.Type != raft.LogCommand ||
			!e.AppendedAt.Equal(time.Unix(1700000000, int64(i))) {
			t.Fatalf("group %s entry %d read back as %+v", g.Name(), i, e)
		}
	}
}

func TestAppendReadAndReopen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	a, b := openGroup(t, l, "orders@1/0"), openGroup(t, l, "orders@1/1")
	store(t, a, 1, 10, 1, 100)
	store(t, b, 5, 7, 2, 3000)
	store(t, a, 11, 12, 2, 100)
	if err := a.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	if err := a.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := a.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	ext := &raft.Log{Index: 8, Term: 2, Type: raft.LogConfiguration, Data: []byte("conf"), Extensions: []byte("ext")}
	if err := b.StoreLog(ext); err != nil {
		t.Fatal(err)
	}
	checkRange(t, a, 1, 12, 100)
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	l = openLog(t, dir, Options{})
	if rec := l.Recovery(); !rec.Clean || len(rec.Damaged) != 0 || rec.TornBytes != 0 {
		t.Fatalf("recovery after a clean close: %+v", rec)
	}
	a, b = openGroup(t, l, "orders@1/0"), openGroup(t, l, "orders@1/1")
	checkRange(t, a, 1, 12, 100)
	if term, err := a.GetUint64([]byte("CurrentTerm")); err != nil || term != 2 {
		t.Fatalf("CurrentTerm = %d, %v", term, err)
	}
	if v, err := a.Get([]byte("LastVoteCand")); err != nil || string(v) != "n3" {
		t.Fatalf("LastVoteCand = %q, %v", v, err)
	}
	var got raft.Log
	if err := b.GetLog(8, &got); err != nil || got.Type != raft.LogConfiguration || string(got.Extensions) != "ext" || string(got.Data) != "conf" {
		t.Fatalf("entry with extensions read back as %+v, %v", got, err)
	}
	if first, _ := b.FirstIndex(); first != 5 {
		t.Fatalf("first index of b = %d", first)
	}
	// Raft tells a missing key by the error's text.
	if _, err := b.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := b.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing number: %v", err)
	}
	if err := b.GetLog(100, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry beyond the last: %v", err)
	}
}

func TestStoreLogsRefusesAGap(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	g := openGroup(t, l, "g")
	store(t, g, 1, 3, 1, 10)
	if err := g.StoreLogs(entries("g", 5, 6, 1, 10)); err == nil {
		t.Fatal("entries 5-6 after 3 were accepted")
	}
	if err := g.StoreLogs([]*raft.Log{{Index: 4}, {Index: 6}}); err == nil {
		t.Fatal("entries 4 and 6 in one call were accepted")
	}
	checkRange(t, g, 1, 3, 10)
}

func TestDeleteRange(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	g := openGroup(t, l, "g")
	store(t, g, 1, 20, 1, 10)
	// A prefix, as after a snapshot.
	if err := g.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	checkRange(t, g, 6, 20, 10)
	// A suffix, as on a conflict with a new leader; then the new entries.
	if err := g.DeleteRange(15, 20); err != nil {
		t.Fatal(err)
	}
	checkRange(t, g, 6, 14, 10)
	store(t, g, 15, 16, 2, 10)
	if err := g.DeleteRange(8, 10); err == nil {
		t.Fatal("deleting from the middle was accepted")
	}
	l.Close()

	l = openLog(t, dir, Options{})
	g = openGroup(t, l, "g")
	checkRange(t, g, 6, 16, 10)
	// Everything, as after installing a snapshot; the log may then start
	// anywhere.
	if err := g.DeleteRange(6, 16); err != nil {
		t.Fatal(err)
	}
	checkRange(t, g, 0, 0, 10)
	store(t, g, 100, 101, 3, 10)
	l.Close()
	l = openLog(t, dir, Options{})
	checkRange(t, openGroup(t, l, "g"), 100, 101, 10)
}

func TestDropGroupForgetsIt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	g := openGroup(t, l, "g")
	store(t, g, 1, 5, 1, 10)
	g.SetUint64([]byte("CurrentTerm"), 7)
	if err := l.DropGroup("g"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.LastIndex(); !errors.Is(err, ErrDropped) {
		t.Fatalf("dropped handle: %v", err)
	}
	g = openGroup(t, l, "g")
	checkRange(t, g, 0, 0, 10)
	store(t, g, 1, 2, 1, 10)
	l.Close()
	l = openLog(t, dir, Options{})
	g = openGroup(t, l, "g")
	checkRange(t, g, 1, 2, 10)
	if _, err := g.GetUint64([]byte("CurrentTerm")); err == nil {
		t.Fatal("the dropped group's term came back")
	}
}

func TestRotationKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4 << 10, RetainBytes: 1 << 30}
	l := openLog(t, dir, opts)
	a, b := openGroup(t, l, "a"), openGroup(t, l, "b")
	for i := uint64(1); i <= 200; i++ {
		store(t, a, i, i, 1, 100)
		if i%3 == 0 {
			store(t, b, i/3, i/3, 1, 500)
		}
	}
	if s := l.Stats(); s.Segments < 10 {
		t.Fatalf("only %d segments for ~50 KiB in 4 KiB segments", s.Segments)
	}
	checkRange(t, a, 1, 200, 100)
	l.Close()
	l = openLog(t, dir, opts)
	checkRange(t, openGroup(t, l, "a"), 1, 200, 100)
	checkRange(t, openGroup(t, l, "b"), 1, 66, 500)
	if rec := l.Recovery(); len(rec.Damaged) != 0 || rec.TornBytes != 0 {
		t.Fatalf("recovery: %+v", rec)
	}
}

// blockingFS holds every sync until released, to observe group commit.
type blockingFS struct {
	OSFS
	syncing chan struct{} // a sync has started
	release chan struct{}
}

func (b *blockingFS) Create(name string) (File, error) {
	f, err := b.OSFS.Create(name)
	return blockingFile{f, b}, err
}

func (b *blockingFS) OpenRW(name string) (File, error) {
	f, err := b.OSFS.OpenRW(name)
	return blockingFile{f, b}, err
}

type blockingFile struct {
	File
	b *blockingFS
}

func (f blockingFile) Sync() error {
	f.b.syncing <- struct{}{}
	<-f.b.release
	return f.File.Sync()
}

func TestGroupCommitCoalescesAndWaitsForTheSync(t *testing.T) {
	fs := &blockingFS{syncing: make(chan struct{}), release: make(chan struct{})}
	l, err := Open(t.TempDir(), Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	// The first append creates a segment (two syncs: file, directory is
	// not through File) and writes a batch.
	first := openGroup(t, l, "g0")
	go func() {
		<-fs.syncing // segment header
		fs.release <- struct{}{}
	}()
	errc := make(chan error, 1)
	go func() { errc <- first.StoreLogs(entries("g0", 1, 1, 1, 10)) }()
	<-fs.syncing // the batch's sync is under way and held

	// Fifteen more groups append while that sync is held: none returns,
	// and the next write takes all fifteen.
	const n = 15
	var wg sync.WaitGroup
	returned := make(chan string, n)
	for i := 1; i <= n; i++ {
		g := openGroup(t, l, fmt.Sprintf("g%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.StoreLogs(entries(g.Name(), 1, 1, 1, 10)); err != nil {
				t.Error(err)
			}
			returned <- g.Name()
		}()
	}
	// Wait until all fifteen are queued behind the writer, which holds the
	// first batch.
	await.Until(t, 10*time.Second, fmt.Sprintf("all %d appends queued", n), func() bool { return len(l.reqs) >= n })
	select {
	case name := <-returned:
		t.Fatalf("%s returned before its records were synced", name)
	default:
	}
	fs.release <- struct{}{} // the first batch completes
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	before := l.Stats()
	<-fs.syncing // the second batch's sync: it must hold everyone else
	select {
	case name := <-returned:
		t.Fatalf("%s returned before its records were synced", name)
	default:
	}
	fs.release <- struct{}{}
	wg.Wait()
	after := l.Stats()
	if got := after.Batches - before.Batches; got != 1 {
		t.Fatalf("%d appends from %d groups took %d batches, want 1", n, n, got)
	}
	go func() {
		for range fs.syncing {
			fs.release <- struct{}{}
		}
	}()
	l.Close()
	close(fs.syncing)
}
