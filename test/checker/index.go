package checker

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/raftbus/raftbus/test/history"
)

// delivery is one message handed out by a receive or found by a drain.
type delivery struct {
	history.Delivery
	entity string
	op     *history.Op
	drain  bool
	dlq    bool
	// rad: taken by a ReceiveAndDelete receive, which removed it.
	rad bool
	// taken is the earliest the message may have been taken: the start
	// of its receive, or of an earlier receive of the same receiver whose
	// outcome was unknown, whose messages the SDK hands out with the
	// receiver's next receive.
	taken int64
}

func (d *delivery) start() int64 { return d.taken }
func (d *delivery) end() int64   { return d.op.End }

// locked reports whether the delivery holds a PeekLock lock.
func (d *delivery) locked() bool { return !d.drain && !d.rad }

// entity is what the history says of one queue, topic or subscription.
type entity struct {
	path string
	// settings as created and as updated since (changes that may have
	// happened: acknowledged or with an unknown outcome).
	settings []history.Settings
	// created is when its creation was acknowledged (0: it was there from
	// the start, or its creation is not known to have happened).
	created     int64
	createKnown bool
	deleted     bool // a delete that may have happened
	// notFound: a delete or the final drain found it gone though nothing
	// may have deleted it before.
	notFound     *history.Op
	rulesChanged bool
	subs         []string // a topic's subscriptions
}

// message is one message of the workload, by its id, with every attempt
// to send or schedule it.
type message struct {
	id       string
	entity   string
	attempts []*history.Op
}

// acked is the first acknowledged attempt, nil when none was.
func (m *message) acked() *history.Op {
	for _, a := range m.attempts {
		if a.Outcome == history.OK {
			return a
		}
	}
	return nil
}

// firstStart is when the earliest attempt that may have happened started:
// no copy of the message can exist before it.
func (m *message) firstStart() int64 {
	first := int64(math.MaxInt64)
	for _, a := range m.attempts {
		if a.Outcome != history.Fail {
			first = min(first, a.Start)
		}
	}
	return first
}

// mayHaveHappened counts the attempts that may have stored a copy.
func (m *message) mayHaveHappened() int {
	n := 0
	for _, a := range m.attempts {
		if a.Outcome != history.Fail {
			n++
		}
	}
	return n
}

func (m *message) scheduled() bool { return m.attempts[0].Kind == history.Schedule }

// copyKey names one entity's copy of a message: the queue it was sent to,
// or one subscription of the topic.
type copyKey struct{ entity, id string }

// copyOf is what happened to one copy.
type copyOf struct {
	key        copyKey
	deliveries []*delivery
	// settles are the settlements and lock renewals of its deliveries.
	settles []*history.Op
}

// hold is one session lock: granted between Accept's Start and End.
type hold struct {
	accept *history.Op
	renews []*history.Op
	closes []*history.Op
}

// codeNotFound is the broker's reason for an entity that does not exist.
const codeNotFound = "NOT_FOUND"

// run indexes a history.
type run struct {
	opt        Options
	operations int
	faults     []*history.Op // injected, not healed
	// quietFrom is when the last fault (or healing) ended: from then on
	// the cluster is whole.
	quietFrom int64
	failed    []*history.Op // fault ops that did not go as they should
	entities  map[string]*entity
	messages  map[string]*message
	copies    map[copyKey]*copyOf
	// unknownReceives of each entity: receives with an unknown outcome,
	// which may have locked or taken messages nobody saw.
	unknownReceives map[string][]*history.Op
	// unclaimed: the unknown receives of each process and entity, whose
	// messages that process's next receives may hand out.
	unclaimed map[procEntity][]*history.Op
	holds     map[string]*hold
	states    map[[2]string][]*history.Op // by entity and session
	settles   []*history.Op               // Complete and DeadLetter, acknowledged
	cancels   map[string][]*history.Op
	numbered  []history.Op // every acknowledged Send with a number
	// answeredAsFirst: acknowledged Sends taken as duplicates, answered
	// with the number and enqueue time of the id's first copy.
	answeredAsFirst []history.Op
	digests         []*history.Op
	drainEnd        int64   // when the last drain ended
	successes       []int64 // End of every acknowledged client operation
	end             int64   // the last End of any client operation
}

func newRun(ops []history.Op, opt Options) *run {
	c := &run{
		opt:             opt,
		entities:        make(map[string]*entity),
		messages:        make(map[string]*message),
		copies:          make(map[copyKey]*copyOf),
		unknownReceives: make(map[string][]*history.Op),
		unclaimed:       make(map[procEntity][]*history.Op),
		holds:           make(map[string]*hold),
		states:          make(map[[2]string][]*history.Op),
		cancels:         make(map[string][]*history.Op),
	}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case history.Fault:
			c.quietFrom = max(c.quietFrom, op.End)
			if !op.Heal {
				c.faults = append(c.faults, op)
			}
			if op.Outcome == history.Fail {
				c.failed = append(c.failed, op)
			}
			continue
		case history.Drain:
			if op.Outcome == history.Fail && op.Code == codeNotFound {
				c.gone(op)
				continue
			}
			for _, d := range op.Messages {
				c.deliver(op, d, true)
			}
			c.drainEnd = max(c.drainEnd, op.End)
			continue
		case history.Digest:
			c.digests = append(c.digests, op)
			continue
		case history.Change:
			c.change(op)
		}
		c.operations++
		c.end = max(c.end, op.End)
		if op.Outcome == history.OK {
			c.successes = append(c.successes, op.End)
		}
		c.index(op)
	}
	sort.Slice(c.successes, func(i, j int) bool { return c.successes[i] < c.successes[j] })
	return c
}

// index files one client operation.
func (c *run) index(op *history.Op) {
	switch op.Kind {
	case history.Send, history.Schedule:
		m := c.messages[op.MessageID]
		if m == nil {
			m = &message{id: op.MessageID, entity: op.Entity}
			c.messages[op.MessageID] = m
		}
		m.attempts = append(m.attempts, op)
		if op.Outcome == history.OK && op.Kind == history.Send && op.Seq != 0 {
			if op.Duplicate {
				c.answeredAsFirst = append(c.answeredAsFirst, *op)
			} else {
				c.numbered = append(c.numbered, *op)
			}
		}
	case history.Receive:
		switch op.Outcome {
		case history.OK:
			taken := c.claimable(op)
			for _, d := range op.Messages {
				c.deliver(op, d, false).taken = taken
			}
		case history.Unknown:
			c.unknownReceives[op.Entity] = append(c.unknownReceives[op.Entity], op)
			k := procEntity{op.Process, op.Entity}
			c.unclaimed[k] = append(c.unclaimed[k], op)
		}
	case history.Complete, history.Abandon, history.DeadLetter, history.Defer, history.RenewLock:
		cp := c.copyOf(copyKey{op.Entity, op.MessageID})
		cp.settles = append(cp.settles, op)
		if op.Outcome == history.OK && (op.Kind == history.Complete || op.Kind == history.DeadLetter) {
			c.settles = append(c.settles, op)
		}
	case history.Cancel:
		c.cancels[op.MessageID] = append(c.cancels[op.MessageID], op)
	case history.Accept:
		if op.Outcome == history.OK {
			c.hold(op.Lock).accept = op
		}
	case history.RenewSession:
		c.hold(op.Lock).renews = append(c.hold(op.Lock).renews, op)
	case history.CloseSession:
		c.hold(op.Lock).closes = append(c.hold(op.Lock).closes, op)
	case history.GetState, history.SetState:
		k := [2]string{op.Entity, op.SessionID}
		c.states[k] = append(c.states[k], op)
	}
}

func (c *run) deliver(op *history.Op, d history.Delivery, drain bool) *delivery {
	cp := c.copyOf(copyKey{op.Entity, d.MessageID})
	dl := &delivery{Delivery: d, entity: op.Entity, op: op, drain: drain, dlq: op.DLQ,
		rad: !drain && op.Mode == history.ReceiveAndDelete, taken: op.Start}
	cp.deliveries = append(cp.deliveries, dl)
	return dl
}

type procEntity struct {
	proc   int
	entity string
}

// receiptWindow is the shortest time the broker keeps what a receive
// received for its repeats; it keeps it for the lock duration when that
// is longer.
const receiptWindow = int64(30 * time.Second)

// claimable is the earliest start of the receives of op's process and
// entity whose outcome was unknown and whose messages op may hand out:
// those still within the broker's receipt window (op.Start when none).
func (c *run) claimable(op *history.Op) int64 {
	window := receiptWindow
	for _, s := range c.settingsOf(op.Entity) {
		window = max(window, s.LockDuration)
	}
	window += int64(c.opt.ClockUncertainty)
	taken := op.Start
	for _, u := range c.unclaimed[procEntity{op.Process, op.Entity}] {
		if u.End+window >= op.Start {
			taken = min(taken, u.Start)
		}
	}
	return taken
}

func (c *run) copyOf(k copyKey) *copyOf {
	cp := c.copies[k]
	if cp == nil {
		cp = &copyOf{key: k}
		c.copies[k] = cp
	}
	return cp
}

func (c *run) hold(id string) *hold {
	h := c.holds[id]
	if h == nil {
		h = &hold{}
		c.holds[id] = h
	}
	return h
}

// change records what an entity change may have done.
func (c *run) change(op *history.Op) {
	e := c.entity(op.Entity)
	if op.Change == history.DeleteEntity && op.Outcome == history.Fail && op.Code == codeNotFound {
		c.gone(op)
		return
	}
	if op.Outcome == history.Fail {
		return
	}
	switch op.Change {
	case history.CreateEntity, history.UpdateEntity:
		if op.Settings != nil {
			e.settings = append(e.settings, *op.Settings)
			if t := op.Settings.Topic; t != "" && !slices.Contains(c.entity(t).subs, op.Entity) {
				c.entity(t).subs = append(c.entity(t).subs, op.Entity)
			}
		}
		if op.Change == history.CreateEntity && op.Outcome == history.OK {
			e.created, e.createKnown = op.End, true
		}
	case history.DeleteEntity:
		e.deleted = true
	case history.CreateRule, history.DeleteRule:
		e.rulesChanged = true
	}
}

// gone notes an entity found not to exist: gone, whatever the answer
// says of who removed it.
func (c *run) gone(op *history.Op) {
	e := c.entity(op.Entity)
	if !e.deleted {
		e.notFound = op
	}
	e.deleted = true
}

func (c *run) entity(path string) *entity {
	e := c.entities[path]
	if e == nil {
		e = &entity{path: path}
		c.entities[path] = e
	}
	return e
}

// topicOf is the topic of a subscription ("" for anything else).
func (c *run) topicOf(path string) string {
	if e := c.entities[path]; e != nil && len(e.settings) > 0 {
		return e.settings[0].Topic
	}
	return ""
}

// removed reports whether path, or the topic it belongs to, may have been
// deleted.
func (c *run) removed(path string) bool {
	if e := c.entities[path]; e != nil && e.deleted {
		return true
	}
	if t := c.topicOf(path); t != "" {
		return c.removed(t)
	}
	return false
}

// settingsOf lists every setting path had during the run (none when the
// history does not say).
func (c *run) settingsOf(path string) []history.Settings {
	if e := c.entities[path]; e != nil {
		return e.settings
	}
	return nil
}

// duplicateDetection reports whether messages sent to path (a queue or
// topic) are subject to duplicate detection, and its window.
// forwardTarget is the queue path forwards its messages to, "" when it
// does not (as created: the workload does not change it).
func (c *run) forwardTarget(path string) string {
	if s := c.settingsOf(path); len(s) > 0 {
		return s[0].ForwardTo
	}
	return ""
}

func (c *run) duplicateDetection(path string) (bool, int64) {
	if t := c.topicOf(path); t != "" {
		path = t
	}
	for _, s := range c.settingsOf(path) {
		if s.DuplicateDetection {
			return true, s.DuplicateWindow
		}
	}
	return false, 0
}

// maxDeliveries is the range of MaxDeliveryCount path had (0, 0 when not
// known).
func (c *run) maxDeliveries(path string) (lo, hi int32) {
	for _, s := range c.settingsOf(path) {
		if s.MaxDeliveryCount == 0 {
			continue
		}
		if lo == 0 || s.MaxDeliveryCount < lo {
			lo = s.MaxDeliveryCount
		}
		hi = max(hi, s.MaxDeliveryCount)
	}
	return lo, hi
}

// ttl is the shortest and the longest time to live a copy may have had,
// from the message's own and the defaults of its entity (and topic) as
// they were during the run. 0 is no time to live: lo is 0 when the copy
// never expires, hi when it may never expire.
func (c *run) ttl(k copyKey, m *message) (lo, hi int64) {
	var own int64
	for _, a := range m.attempts {
		own = max(own, a.TTL)
	}
	choices := []int64{own}
	paths := []string{k.entity}
	if t := c.topicOf(k.entity); t != "" {
		paths = append(paths, t)
	}
	for _, p := range paths {
		defaults := []int64{}
		for _, s := range c.settingsOf(p) {
			defaults = append(defaults, s.DefaultTTL)
		}
		if len(defaults) == 0 {
			defaults = []int64{0}
		}
		var next []int64
		for _, x := range choices {
			for _, d := range defaults {
				next = append(next, minTTL(x, d))
			}
		}
		choices = next
	}
	lo, hi = choices[0], choices[0]
	for _, x := range choices[1:] {
		lo = minTTL(lo, x)
		if x == 0 || hi == 0 {
			hi = 0
		} else {
			hi = max(hi, x)
		}
	}
	return lo, hi
}

// minTTL is the shorter of two times to live, 0 being none.
func minTTL(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// deadLettersExpired reports whether path moves expired messages to its
// dead-letter sub-queue (always: true; never: false; it changed: both).
func (c *run) deadLettersExpired(path string) (always, never bool) {
	always, never = true, true
	for _, s := range c.settingsOf(path) {
		if s.DeadLetterOnExpiration {
			never = false
		} else {
			always = false
		}
	}
	if len(c.settingsOf(path)) == 0 {
		always = false
	}
	return always, never
}

// acknowledged counts messages with an acknowledged send or schedule.
func (c *run) acknowledged() int {
	n := 0
	for _, m := range c.messages {
		if m.acked() != nil {
			n++
		}
	}
	return n
}

// sortedCopies lists the copies in a stable order.
func (c *run) sortedCopies() []*copyOf {
	out := make([]*copyOf, 0, len(c.copies))
	for _, cp := range c.copies {
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.entity != out[j].key.entity {
			return out[i].key.entity < out[j].key.entity
		}
		return out[i].key.id < out[j].key.id
	})
	return out
}
