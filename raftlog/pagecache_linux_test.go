package raftlog

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the pages of the named file that are in the page
// cache, and all its pages.
func residentPages(t *testing.T, name string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// Mapping a file reads none of it; mincore only looks.
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// What the log has written and synced leaves the page cache: a node's
// cache does not grow by every byte its log writes, and its writes go into
// the same few pages again.
func TestWrittenPagesLeaveThePageCache(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, whose page cache is its storage; set TMPDIR to a directory on a disk", dir)
	}
	l := openLog(t, dir, Options{SegmentSize: 16 << 20})
	g := openGroup(t, l, "g")
	const batches, perBatch, size = 256, 8, 4000 // about 8 MB
	for b := uint64(0); b < batches; b++ {
		store(t, g, b*perBatch+1, (b+1)*perBatch, 1, size)
	}
	// The writer lets go of a batch's pages after answering it, before it
	// takes the next request: once this last append is answered, every
	// batch before it is out of the cache.
	last := uint64(batches*perBatch + 1)
	store(t, g, last, last, 1, size)

	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(names) != 1 {
		t.Fatalf("segments %v (%v), want one", names, err)
	}
	resident, pages := residentPages(t, names[0])
	written := batches * perBatch * size / os.Getpagesize()
	// The last append's pages and the partial page it ends in may stay.
	if resident > 3 {
		t.Fatalf("%d of the segment's %d pages are in the page cache after writing about %d", resident, pages, written)
	}

	// What left the cache reads back from the disk, and after a restart.
	checkRange(t, g, 1, last, size)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, openGroup(t, openLog(t, dir, Options{SegmentSize: 16 << 20}), "g"), 1, last, size)
}
