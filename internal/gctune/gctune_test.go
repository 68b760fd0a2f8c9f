package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
)

func TestPercentStartsTheNextCollectionAtMinHeap(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, maxGOGC},
		{1 << 20, maxGOGC},   // 63 MiB of growth would be 6300 %
		{8 << 20, 700},       // 8 + 56 = 64 MiB
		{16 << 20, 300},      // 16 + 48
		{MinHeap/2 - 1, 100}, // just under half: 100 % reaches MinHeap
		{MinHeap / 2, 100},
		{1 << 30, defaultGOGC},
	} {
		if got := percent(tc.live); got != tc.want {
			t.Errorf("percent(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

func TestTunesAfterEveryCollectionUntilStopped(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(defaultGOGC))
	tu := start()
	for range 3 {
		// Put GOGC back to the default: the next collection must raise it
		// again, for a test binary's live heap is far below MinHeap.
		debug.SetGCPercent(defaultGOGC)
		before := tu.tuned.Load()
		runtime.GC()
		await.Until(t, 10*time.Second, "the tuner to run after a collection", func() bool { return tu.tuned.Load() > before })
		if p := debug.SetGCPercent(defaultGOGC); p <= defaultGOGC {
			t.Fatalf("GOGC %d after a collection with a small live heap, want it raised", p)
		}
	}
	tu.stop()
	if p := debug.SetGCPercent(defaultGOGC); p != defaultGOGC {
		t.Fatalf("GOGC %d after stop, want %d", p, defaultGOGC)
	}
	tuned := tu.tuned.Load()
	runtime.GC()
	await.Until(t, 10*time.Second, "the stopped tuner's last finalizer", func() bool { return tu.skipped.Load() > 0 })
	if p := debug.SetGCPercent(defaultGOGC); p != defaultGOGC || tu.tuned.Load() != tuned {
		t.Fatalf("GOGC %d after a collection once stopped (tuned %d times more), want %d", p, tu.tuned.Load()-tuned, defaultGOGC)
	}
}

func TestStartLeavesAGOGCFromTheEnvironment(t *testing.T) {
	t.Setenv("GOGC", "150")
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	stop := Start()
	defer stop()
	// A tuner, had Start made one, would have set GOGC before returning.
	if p := debug.SetGCPercent(150); p != 150 {
		t.Fatalf("GOGC %d with GOGC=150 in the environment", p)
	}
}
