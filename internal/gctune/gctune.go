// Package gctune keeps Go's garbage collector from running often while a
// process's live heap is small.
//
// With Go's default GOGC of 100 a collection starts when the heap has
// grown by as much as the live heap: a node holding a few megabytes of
// messages, allocating a few kilobytes per message, collects many times
// a second, and each collection's pauses, assists and background work
// land on the requests of the moment. A broker can afford a heap of tens
// of megabytes, so while the live heap is smaller than half of MinHeap the
// tuner raises GOGC until the next collection starts at about MinHeap; from
// there up it leaves GOGC at 100, and the heap grows with the live heap as
// Go would grow it.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// MinHeap is the heap size below which a collection is not worth its cost.
const MinHeap = 64 << 20

const (
	defaultGOGC = 100
	// maxGOGC bounds the raise, for a live heap of next to nothing.
	maxGOGC = 1600
)

// Start tunes GOGC after every collection from now on, unless GOGC is set
// in the environment (the operator's choice stands). The returned stop
// ends the tuning and restores GOGC 100.
func Start() (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	return start().stop
}

type tuner struct {
	stopped atomic.Bool
	// tuned and skipped count the collections after which the tuner ran,
	// before and after stop.
	tuned, skipped atomic.Int64
}

func start() *tuner {
	t := &tuner{}
	t.tune()
	t.arm()
	return t
}

func (t *tuner) stop() {
	t.stopped.Store(true)
	debug.SetGCPercent(defaultGOGC)
}

// arm has tune run once the next collection has finished: a finalizer
// runs after the collection that found its object unreachable.
func (t *tuner) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		if t.stopped.Load() {
			t.skipped.Add(1)
			return
		}
		t.tune()
		t.arm()
	})
}

// tune sets GOGC for the live heap the last collection left.
func (t *tuner) tune() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	debug.SetGCPercent(percent(s[0].Value.Uint64()))
	t.tuned.Add(1)
}

// percent is the GOGC that starts the next collection at about MinHeap
// for a live heap of live bytes, and never below Go's default.
func percent(live uint64) int {
	if live == 0 {
		return maxGOGC
	}
	if live >= MinHeap/2 {
		return defaultGOGC
	}
	return int(min(max((MinHeap-live)*100/live, defaultGOGC), maxGOGC))
}
