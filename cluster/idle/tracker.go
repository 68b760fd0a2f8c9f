package idle

import (
	"strings"
	"sync"
	"sync/atomic"
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
// concurrent use, and calls on different entities do not contend: it is
// on the path of every public call.
type Tracker struct {
	clock clock.Source
	// start is when the tracker started: no path is reported idle for
	// longer than the node has been running.
	start time.Duration
	// exists reports whether a path names an entity; paths that do not
	// are pruned once the tracker grows, so that calls naming entities
	// that do not exist cannot grow it without bound.
	exists func(path string) bool

	paths   sync.Map // path -> *use
	size    atomic.Int64
	pruneAt atomic.Int64
	pruning sync.Mutex
}

// use is one path's record.
type use struct {
	inUse atomic.Int64
	last  atomic.Int64 // monotonic time of the last end of a call
}

// NewTracker returns a tracker reading src, which prunes paths for which
// exists is false.
func NewTracker(src clock.Source, exists func(path string) bool) *Tracker {
	t := &Tracker{clock: src, start: src.Monotonic(), exists: exists}
	t.pruneAt.Store(minPrune)
	return t
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
	uses := make([]*use, len(paths))
	for i, p := range paths {
		uses[i] = t.record(p)
		uses[i].inUse.Add(1)
	}
	return func() {
		now := int64(t.clock.Monotonic())
		for _, u := range uses {
			u.last.Store(max(u.last.Load(), now))
			u.inUse.Add(-1)
		}
		if t.size.Load() >= t.pruneAt.Load() {
			t.prune()
		}
	}
}

// record is path's record, made when it has none.
func (t *Tracker) record(path string) *use {
	if u, ok := t.paths.Load(path); ok {
		return u.(*use)
	}
	u, loaded := t.paths.LoadOrStore(path, &use{})
	if !loaded {
		t.size.Add(1)
	}
	return u.(*use)
}

// prune forgets the paths that name no entity and are not in use.
func (t *Tracker) prune() {
	if !t.pruning.TryLock() {
		return
	}
	defer t.pruning.Unlock()
	var kept int64
	t.paths.Range(func(k, v any) bool {
		if v.(*use).inUse.Load() == 0 && !t.exists(k.(string)) {
			// A call that took the record meanwhile notes its use in
			// a record no longer kept: the path names no entity.
			if t.paths.CompareAndDelete(k, v) {
				t.size.Add(-1)
				return true
			}
		}
		kept++
		return true
	})
	// The next prune comes when the tracker has doubled what this one
	// kept. Not the size now: paths added while this one ran (as many
	// missing ones as concurrent calls made meanwhile) would raise the
	// bound with every prune.
	t.pruneAt.Store(max(minPrune, 2*kept))
}

// IdleFor is how long path has gone unused on this node: zero while a
// call uses it, never more than the tracker has run.
func (t *Tracker) IdleFor(path string) time.Duration {
	now := t.clock.Monotonic()
	since := t.start
	if v, ok := t.paths.Load(path); ok {
		u := v.(*use)
		if u.inUse.Load() > 0 {
			return 0
		}
		since = max(since, time.Duration(u.last.Load()))
	}
	return max(0, now-since)
}

// Len is how many paths the tracker holds.
func (t *Tracker) Len() int { return int(t.size.Load()) }
