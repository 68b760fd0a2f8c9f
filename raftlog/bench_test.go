package raftlog

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkAppend appends entries from 1 and 16 concurrent groups, each
// waiting for its append to be durable before the next (as a Raft leader
// does), with prefix truncations as snapshots make them, on real disk with
// fsync. It reports appends/s, syncs/s, and bytes the process wrote to
// disk per payload byte (/proc/self/io write_bytes, which counts a page
// written again in full).
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 20000x ./raftlog
func BenchmarkAppend(b *testing.B) {
	for _, groups := range []int{1, 16} {
		for _, size := range []int{1 << 10, 30 << 10} {
			b.Run(fmt.Sprintf("groups=%d/entry=%dKiB", groups, size>>10), func(b *testing.B) {
				benchAppend(b, groups, size)
			})
		}
	}
}

func benchAppend(b *testing.B, groups, size int) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	data := make([]byte, size)
	rand.Read(data)
	gs := make([]*Group, groups)
	for i := range gs {
		if gs[i], err = l.Group(fmt.Sprintf("queue@1/%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	s0, w0 := l.Stats(), writeBytes(b)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, g := range gs {
		n := b.N / groups
		if i < b.N%groups {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := uint64(1)
			for idx := uint64(1); idx <= uint64(n); idx++ {
				if err := g.StoreLogs([]*raft.Log{{Index: idx, Term: 1, Data: data}}); err != nil {
					b.Error(err)
					return
				}
				// A snapshot every 8192 entries keeps 10240, as the
				// partition defaults do.
				if idx%8192 == 0 && idx > 10240 {
					if err := g.DeleteRange(first, idx-10240); err != nil {
						b.Error(err)
						return
					}
					first = idx - 10240 + 1
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	s, w := l.Stats(), writeBytes(b)
	payload := float64(b.N) * float64(size)
	b.ReportMetric(float64(b.N)/elapsed, "appends/s")
	b.ReportMetric(float64(s.Syncs-s0.Syncs)/elapsed, "syncs/s")
	b.ReportMetric(float64(w-w0)/payload, "disk-bytes/payload-byte")
	b.ReportMetric(float64(s.BytesWritten-s0.BytesWritten)/payload, "log-bytes/payload-byte")
}

// writeBytes is what this process has had written to disk so far.
func writeBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	b.Skip("no write_bytes in /proc/self/io")
	return 0
}
