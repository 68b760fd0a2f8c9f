package amqp

import (
	"io"
	"sync"
)

// groupWriter writes frames from many goroutines to one connection,
// gathering those that arrive while a write is under way into the next
// write: one system call for many frames when links are busy, as for
// dispositions of concurrent deliveries. Each caller returns once its
// bytes are written, with that write's error, so a frame's order and
// outcome are as with a mutex around each write.
type groupWriter struct {
	w io.Writer

	mu sync.Mutex
	// cond wakes callers waiting for their bytes to be written, or for
	// the writing caller to hand over.
	cond *sync.Cond
	// pending holds the bytes not yet handed to w; spare is the buffer
	// written last, reused.
	pending, spare []byte
	// queued counts the calls whose bytes entered pending, written those
	// whose bytes w took.
	queued, written uint64
	writing         bool
	err             error // the first failed write: every later one fails
}

func newGroupWriter(w io.Writer) *groupWriter {
	g := &groupWriter{w: w}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// write writes b whole, after every b of calls that returned before it
// began.
func (g *groupWriter) write(b []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	g.queued++
	mine := g.queued
	if !g.writing && len(g.pending) == 0 {
		// Nothing to gather: write b as it is, without copying it.
		g.writing = true
		g.mu.Unlock()
		_, err := g.w.Write(b)
		g.mu.Lock()
		g.done(mine, err)
		return err
	}
	g.pending = append(g.pending, b...)
	for g.writing && g.written < mine {
		g.cond.Wait()
	}
	if g.written >= mine {
		return g.err
	}
	// Nobody writes: this caller writes what is pending, its own bytes
	// and whatever gathered behind them, then hands over.
	g.writing = true
	out, upto := g.pending, g.queued
	g.pending = g.spare[:0]
	g.mu.Unlock()
	_, err := g.w.Write(out)
	g.mu.Lock()
	if cap(out) <= maxSpare {
		g.spare = out
	}
	g.done(upto, err)
	return g.err
}

// maxSpare bounds the buffer kept for the next gathered write: a burst of
// large transfers does not pin its size for the connection's life.
const maxSpare = 1 << 20

// done records a write that took the bytes of calls up to upto, and hands
// over to whoever waits.
func (g *groupWriter) done(upto uint64, err error) {
	g.written = upto
	if err != nil && g.err == nil {
		g.err = err
	}
	g.writing = false
	g.cond.Broadcast()
}
