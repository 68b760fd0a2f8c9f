package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
)

// gatedWriter records each Write; the first blocks until release closes.
type gatedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	writes  [][]byte
	fail    error
}

func (w *gatedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	first := len(w.writes) == 0
	w.writes = append(w.writes, bytes.Clone(b))
	w.mu.Unlock()
	if first {
		<-w.release
	}
	if w.fail != nil {
		return 0, w.fail
	}
	return len(b), nil
}

// TestGroupWriterGathersWhatArrivesDuringAWrite: frames written while a
// write is under way go out together in the next one, each whole and in
// the order each goroutine wrote them.
func TestGroupWriterGathersWhatArrivesDuringAWrite(t *testing.T) {
	w := &gatedWriter{release: make(chan struct{})}
	g := newGroupWriter(w)
	firstDone := make(chan error, 1)
	go func() { firstDone <- g.write([]byte("first;")) }()
	await.Until(t, 10*time.Second, "the first write to start", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.writes) == 1
	})
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if err := g.write(fmt.Appendf(nil, "w%d-%d;", i, j)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Each writer has one frame queued behind the blocked write.
	await.Until(t, 10*time.Second, "every writer to queue a frame", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.queued == 1+writers
	})
	close(w.release)
	wg.Wait()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if len(w.writes) < 2 || string(w.writes[1]) == "" || strings.Count(string(w.writes[1]), ";") != writers {
		t.Fatalf("the second write carried %q, want the %d frames queued meanwhile", w.writes[1], writers)
	}
	frames := writers*each + 1
	if len(w.writes) >= frames {
		t.Fatalf("%d writes for %d frames: nothing was gathered", len(w.writes), frames)
	}
	all := string(bytes.Join(w.writes, nil))
	for i := range writers {
		last := -1
		for j := range each {
			at := strings.Index(all, fmt.Sprintf("w%d-%d;", i, j))
			if at < 0 || at < last {
				t.Fatalf("frame w%d-%d missing or out of order in %q", i, j, all)
			}
			last = at
		}
	}
	if strings.Count(all, ";") != frames {
		t.Fatalf("%d frames written, want %d: %q", strings.Count(all, ";"), frames, all)
	}
}

// TestGroupWriterFailsEveryLaterWrite: once a write fails, the callers
// whose frames it carried and every later caller get the error.
func TestGroupWriterFailsEveryLaterWrite(t *testing.T) {
	broken := errors.New("connection reset")
	w := &gatedWriter{release: make(chan struct{}), fail: broken}
	close(w.release)
	g := newGroupWriter(w)
	if err := g.write([]byte("a")); !errors.Is(err, broken) {
		t.Fatalf("write: %v, want %v", err, broken)
	}
	if err := g.write([]byte("b")); !errors.Is(err, broken) {
		t.Fatalf("later write: %v, want %v", err, broken)
	}
	if len(w.writes) != 1 {
		t.Fatalf("%d writes reached the connection after it broke", len(w.writes)-1)
	}
}
