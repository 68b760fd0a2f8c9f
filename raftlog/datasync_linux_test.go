package raftlog

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDatasync measures what a segment's sync costs (a 32 KiB write,
// then fdatasync) by how the file's blocks came to be: reserved with
// fallocate as segments are (ext4 marks such blocks unwritten, and the
// first sync after writing into them also writes the change that marks
// them written: a journal commit, or with no journal the extent tree),
// written once before (zeros), or appended to the end of the file. It reports the process's CPU time per sync besides the wall
// time.
//
//	go test -run '^$' -bench BenchmarkDatasync -benchtime 3000x ./raftlog
func BenchmarkDatasync(b *testing.B) {
	for _, how := range []string{"fallocated", "written", "appended"} {
		b.Run(how, func(b *testing.B) { benchDatasync(b, how) })
	}
}

func benchDatasync(b *testing.B, how string) {
	const chunk = 32 << 10
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "segment"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	size := int64(b.N) * chunk
	switch how {
	case "fallocated":
		err = allocate(f, size)
	case "written":
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
			_, err = f.WriteAt(zeros, off)
		}
	}
	if err == nil {
		err = datasync(f)
	}
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i)
	}
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, int64(i)*chunk); err != nil {
			b.Fatal(err)
		}
		if err := datasync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/sync")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
