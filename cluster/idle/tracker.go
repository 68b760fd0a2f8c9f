package idle

import (
	"strings"
	"sync"
	"time"

	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/cluster/meta"
)

// deadLetterSuffix ends the path of an entity's dead-letter sub-queue,
// which is used when the entity is.
const deadLetterSuffix = "/$DeadLetterQueue"

// minPrune is the size below which a Tracker never prunes.
const minPrune = 1024

// Tracker notes when this node last served a call touching each entity
// path. It measures on the monotonic clock of its source, so that a step
// of the wall clock never makes an entity look idle. It is safe for
// concurrent use.
type Tracker struct {
	clock clock.Source
	// start is when the tracker started: no path is reported idle for
	// longer than the node has been running.
	start time.Duration
	// exists reports whether a path names an entity; paths that do not
	// are pruned once the tracker grows, so that calls naming entities
	// that do not exist cannot grow it without bound.
	exists func(path string) bool

	mu      sync.Mutex
	last    map[string]time.Duration
	inUse   map[string]int
	pruneAt int
}

// NewTracker returns a tracker reading src, which prunes paths for which
// exists is false.
func NewTracker(src clock.Source, exists func(path string) bool) *Tracker {
	return &Tracker{
		clock: src, start: src.Monotonic(), exists: exists,
		last: make(map[string]time.Duration), inUse: make(map[string]int), pruneAt: minPrune,
	}
}

// Paths are the entity paths a call on path uses: the entity (a
// dead-letter sub-queue counts as its entity), and for a subscription its
// topic too (a topic is in use while one of its subscriptions is).
func Paths(path string) []string {
	path = strings.TrimSuffix(path, deadLetterSuffix)
	if path == "" {
		return nil
	}
	if topic, _, ok := meta.SplitSubscriptionPath(path); ok {
		return []string{path, topic}
	}
	return []string{path}
}

// Use notes paths as in use until done is called (which notes them as
// used then).
func (t *Tracker) Use(paths ...string) (done func()) {
	if len(paths) == 0 {
		return func() {}
	}
	t.mu.Lock()
	for _, p := range paths {
		t.inUse[p]++
	}
	t.mu.Unlock()
	return func() {
		now := t.clock.Monotonic()
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, p := range paths {
			if t.inUse[p]--; t.inUse[p] <= 0 {
				delete(t.inUse, p)
			}
			t.last[p] = now
		}
		if len(t.last) >= t.pruneAt {
			t.prune()
		}
	}
}

// prune forgets the paths that name no entity.
func (t *Tracker) prune() {
	for p := range t.last {
		if t.inUse[p] == 0 && !t.exists(p) {
			delete(t.last, p)
		}
	}
	t.pruneAt = max(minPrune, 2*len(t.last))
}

// IdleFor is how long path has gone unused on this node: zero while a
// call uses it, never more than the tracker has run.
func (t *Tracker) IdleFor(path string) time.Duration {
	now := t.clock.Monotonic()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inUse[path] > 0 {
		return 0
	}
	since := t.start
	if last, ok := t.last[path]; ok {
		since = max(since, last)
	}
	return max(0, now-since)
}

// Len is how many paths the tracker holds.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.last)
}
