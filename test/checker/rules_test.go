package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/test/history"
)

// Hand-made histories for the rules that judge by an entity's settings,
// locks, delivery counts, time to live, session state and replicas. Each
// case is a short story; most come in pairs, the violation and the
// nearest history that is fine.

const sec = int64(time.Second)

// entityOp declares an entity the way the workload records the entities a
// run starts with.
func entityOp(path string, s history.Settings) history.Op {
	return history.Op{Kind: history.Change, Change: history.CreateEntity, Entity: path, Settings: &s, Outcome: history.OK}
}

// locked is a PeekLock delivery with a lock token and locked-until.
func locked(id string, seq int64, count int32, token string, until int64) history.Delivery {
	return history.Delivery{MessageID: id, Seq: seq, DeliveryCount: count, LockToken: token, LockedUntil: until}
}

func recvAt(entity string, start, end int64, ds ...history.Delivery) history.Op {
	return history.Op{Kind: history.Receive, Entity: entity, Start: start, End: end, Outcome: history.OK, Messages: ds}
}

func settleAt(kind history.Kind, entity, id string, seq int64, token string, start, end int64, o history.Outcome) history.Op {
	return history.Op{Kind: kind, Entity: entity, MessageID: id, Seq: seq, LockToken: token, Start: start, End: end, Outcome: o}
}

func sendAt(entity, id string, seq int64, start, end int64, o history.Outcome) history.Op {
	return history.Op{Kind: history.Send, Entity: entity, MessageID: id, Seq: seq, Start: start, End: end, Outcome: o}
}

func drainAt(entity string, dlq bool, ds ...history.Delivery) history.Op {
	t := int64(50 * sec)
	if dlq {
		t++
	}
	return history.Op{Kind: history.Drain, Entity: entity, DLQ: dlq, Start: t, End: t, Messages: ds}
}

var plainQueue = history.Settings{LockDuration: 2 * sec, MaxDeliveryCount: 3}

// ruleCase is a history and the violation it must produce ("" for none).
type ruleCase struct {
	name  string
	ops   []history.Op
	field func(*Report) []string
	want  string
	// late is the Options.LateEffect the case is checked with.
	late time.Duration
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ops, Options{ClockUncertainty: 10 * time.Millisecond, ExpiryGrace: time.Second, LateEffect: tc.late})
			if tc.want == "" {
				if !r.OK() {
					t.Fatalf("want no violation, got:\n%s", r)
				}
				return
			}
			got := tc.field(r)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("want one violation containing %q, got %q\n%s", tc.want, got, r)
			}
			if r.OK() {
				t.Fatal("OK() is true despite a violation")
			}
		})
	}
}

func lost(r *Report) []string { return r.Lost }

// story: a message sent, received, then what the case adds.
func story(more ...history.Op) []history.Op {
	ops := []history.Op{
		entityOp("q", plainQueue),
		sendAt("q", "m", 1, 1*sec, 2*sec, history.OK),
		recvAt("q", 3*sec, 4*sec, locked("m", 1, 1, "t1", 6*sec)),
	}
	return append(ops, more...)
}

// lostBeforeSend: a ReceiveAndDelete whose outcome is unknown, given up
// on before the send of the message the lost rule looks for.
var lostBeforeSend = []history.Op{entityOp("q", plainQueue),
	{Kind: history.Receive, Entity: "q", Mode: history.ReceiveAndDelete, Start: 0, End: sec / 2, Outcome: history.Unknown},
	sendAt("q", "m", 1, 1*sec, 2*sec, history.OK)}

func TestLostRule(t *testing.T) {
	runRuleCases(t, []ruleCase{{
		name:  "abandoned, acknowledged, then missing",
		ops:   story(settleAt(history.Abandon, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.OK)),
		field: lost, want: "m in q seq 1: send acknowledged at 2s, delivered to proc 0 at 4s (count 1), abandon ok at 5s, then missing",
	}, {
		name:  "lock expired, then missing",
		ops:   story(),
		field: lost, want: "m in q seq 1",
	}, {
		name:  "deferred, then missing",
		ops:   story(settleAt(history.Defer, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.OK)),
		field: lost, want: "m in q seq 1",
	}, {
		name:  "dead-lettered and missing from the dead-letter queue",
		ops:   story(settleAt(history.DeadLetter, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.OK)),
		field: lost, want: "m in q seq 1",
	}, {
		name: "dead-lettered and drained from the dead-letter queue",
		ops: story(settleAt(history.DeadLetter, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.OK),
			drainAt("q", true, history.Delivery{MessageID: "m", Seq: 1, DeliveryCount: 1})),
	}, {
		name: "completed",
		ops:  story(settleAt(history.Complete, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.OK)),
	}, {
		name: "a complete with an unknown outcome may have happened",
		ops:  story(settleAt(history.Complete, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.Unknown)),
	}, {
		name:  "a complete that failed did not",
		ops:   story(settleAt(history.Complete, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.Fail)),
		field: lost, want: "m in q seq 1",
	}, {
		name: "abandoned, redelivered and completed",
		ops: story(settleAt(history.Abandon, "q", "m", 1, "t1", 5*sec, 5*sec+1, history.OK),
			recvAt("q", 7*sec, 8*sec, locked("m", 1, 2, "t2", 10*sec)),
			settleAt(history.Complete, "q", "m", 1, "t2", 9*sec, 9*sec+1, history.OK)),
	}, {
		name: "taken by ReceiveAndDelete",
		ops: []history.Op{entityOp("q", plainQueue), sendAt("q", "m", 1, 1*sec, 2*sec, history.OK),
			{Kind: history.Receive, Entity: "q", Mode: history.ReceiveAndDelete, Start: 3 * sec, End: 4 * sec, Outcome: history.OK,
				Messages: []history.Delivery{{MessageID: "m", Seq: 1, DeliveryCount: 1}}}},
	}, {
		name: "maybe taken by a ReceiveAndDelete whose answer was lost",
		ops: []history.Op{entityOp("q", plainQueue), sendAt("q", "m", 1, 1*sec, 2*sec, history.OK),
			{Kind: history.Receive, Entity: "q", Mode: history.ReceiveAndDelete, Start: 3 * sec, End: 4 * sec, Outcome: history.Unknown}},
	}, {
		name:  "a lost ReceiveAndDelete that ended before the send cannot have taken it",
		ops:   lostBeforeSend,
		field: lost, want: "m in q seq 1: send acknowledged at 2s, never delivered nor found",
	}, {
		name: "a lost ReceiveAndDelete held up in the network may take what was sent after it ended",
		ops:  lostBeforeSend,
		late: time.Second,
	}, {
		name:  "but not what was sent after the network could have held it",
		ops:   lostBeforeSend,
		late:  time.Duration(sec / 4),
		field: lost, want: "m in q seq 1: send acknowledged at 2s, never delivered nor found",
	}, {
		name: "a lost PeekLock receive consumes nothing",
		ops: []history.Op{entityOp("q", plainQueue), sendAt("q", "m", 1, 1*sec, 2*sec, history.OK),
			{Kind: history.Receive, Entity: "q", Start: 3 * sec, End: 4 * sec, Outcome: history.Unknown}},
		field: lost, want: "m in q seq 1: send acknowledged at 2s, never delivered nor found",
	}, {
		name: "expired on an entity that drops expired messages",
		ops: []history.Op{entityOp("q", history.Settings{DefaultTTL: 5 * sec}),
			sendAt("q", "m", 1, 1*sec, 2*sec, history.OK), drainAt("q", false)},
	}, {
		name: "missing before its time to live could end",
		ops: []history.Op{entityOp("q", history.Settings{DefaultTTL: 5000 * sec}),
			sendAt("q", "m", 1, 1*sec, 2*sec, history.OK), drainAt("q", false)},
		field: lost, want: "m in q",
	}, {
		name: "expired on an entity that dead-letters expired messages, and not there",
		ops: []history.Op{entityOp("q", history.Settings{DefaultTTL: 5 * sec, DeadLetterOnExpiration: true}),
			sendAt("q", "m", 1, 1*sec, 2*sec, history.OK), drainAt("q", false), drainAt("q", true)},
		field: lost, want: "m in q",
	}, {
		name: "in a subscription deleted during the run",
		ops: []history.Op{entityOp("t/subscriptions/s", history.Settings{Topic: "t", Filter: &history.Filter{Rules: []history.Rule{{}}}}),
			sendAt("t", "m", 1, 1*sec, 2*sec, history.OK),
			recvAt("t/subscriptions/s", 3*sec, 4*sec, locked("m", 7, 1, "t1", 6*sec)),
			{Kind: history.Change, Change: history.DeleteEntity, Entity: "t/subscriptions/s", Start: 5 * sec, End: 6 * sec, Outcome: history.Unknown}},
	}, {
		name: "a scheduled message whose cancel may have happened",
		ops: []history.Op{{Kind: history.Schedule, Entity: "q", MessageID: "m", Seq: 1, Start: sec, End: 2 * sec, ScheduledFor: 10 * sec, Outcome: history.OK},
			{Kind: history.Cancel, Entity: "q", MessageID: "m", Seq: 1, Start: 3 * sec, End: 4 * sec, Outcome: history.Unknown}},
	}})
}

// topic has two subscriptions with filters: "red" gets color=red, "all"
// everything; "late" was created after the send.
func topic(more ...history.Op) []history.Op {
	red := &history.Filter{Rules: []history.Rule{{{Property: "color", Values: []string{"red"}}}}}
	all := &history.Filter{Rules: []history.Rule{{}}}
	ops := []history.Op{
		entityOp("t/subscriptions/red", history.Settings{Topic: "t", Filter: red}),
		entityOp("t/subscriptions/all", history.Settings{Topic: "t", Filter: all}),
		{Kind: history.Send, Entity: "t", MessageID: "blue", Props: map[string]string{"color": "blue"}, Start: sec, End: 2 * sec, Outcome: history.OK},
		{Kind: history.Change, Change: history.CreateEntity, Entity: "t/subscriptions/late", Start: 3 * sec, End: 4 * sec, Outcome: history.OK,
			Settings: &history.Settings{Topic: "t", Filter: all}},
	}
	return append(ops, more...)
}

func TestTopicRules(t *testing.T) {
	runRuleCases(t, []ruleCase{{
		name:  "a subscription whose rules accept the message must get it",
		ops:   topic(drainAt("t/subscriptions/red", false)),
		field: lost, want: "blue in t/subscriptions/all: send acknowledged at 2s, never delivered nor found",
	}, {
		name: "one whose rules reject it, or created later, need not",
		ops:  topic(drainAt("t/subscriptions/all", false, history.Delivery{MessageID: "blue", Seq: 4})),
	}, {
		name: "one whose rules reject it must not",
		ops: topic(drainAt("t/subscriptions/all", false, history.Delivery{MessageID: "blue", Seq: 4}),
			drainAt("t/subscriptions/red", false, history.Delivery{MessageID: "blue", Seq: 4})),
		field: func(r *Report) []string { return r.FilterViolations }, want: "blue (properties map[color:blue]) in t/subscriptions/red",
	}, {
		name: "after its rules changed, nothing is expected of it",
		ops: topic(drainAt("t/subscriptions/all", false, history.Delivery{MessageID: "blue", Seq: 4}),
			drainAt("t/subscriptions/red", false, history.Delivery{MessageID: "blue", Seq: 4}),
			history.Op{Kind: history.Change, Change: history.CreateRule, Entity: "t/subscriptions/red", Start: 5 * sec, End: 6 * sec, Outcome: history.OK}),
	}})
}

func TestPhantomsAndDuplicates(t *testing.T) {
	dedup := history.Settings{DuplicateDetection: true, DuplicateWindow: 600 * sec}
	drained := func(seqs ...int64) history.Op {
		var ds []history.Delivery
		for _, s := range seqs {
			ds = append(ds, history.Delivery{MessageID: "m", Seq: s})
		}
		return drainAt("q", false, ds...)
	}
	anon := func(o history.Outcome, start int64) history.Op {
		op := sendAt("q", "m", 0, start, start+sec, o)
		op.Anonymous = true
		return op
	}
	runRuleCases(t, []ruleCase{{
		name:  "delivered though every send failed",
		ops:   []history.Op{entityOp("q", plainQueue), sendAt("q", "m", 0, sec, 2*sec, history.Fail), drained(1)},
		field: func(r *Report) []string { return r.Phantoms }, want: "m in q seq 1: delivered at 50s though all 1 sends failed",
	}, {
		name:  "two copies under duplicate detection",
		ops:   []history.Op{entityOp("q", dedup), sendAt("q", "m", 0, sec, 2*sec, history.Unknown), sendAt("q", "m", 0, 3*sec, 4*sec, history.OK), drained(1, 2)},
		field: func(r *Report) []string { return r.Duplicated }, want: "m in q stored 2 times (seqs [1 2]) from 2 sends that may have happened, under duplicate detection",
	}, {
		name: "two copies of a send repeated after an unknown outcome, without duplicate detection",
		ops:  []history.Op{entityOp("q", plainQueue), anon(history.Unknown, sec), anon(history.OK, 3*sec), drained(1, 2)},
	}, {
		name:  "two copies of a message sent once",
		ops:   []history.Op{entityOp("q", plainQueue), anon(history.Fail, sec), anon(history.OK, 3*sec), drained(1, 2)},
		field: func(r *Report) []string { return r.Duplicated }, want: "m in q stored 2 times (seqs [1 2]) from 1 sends",
	}, {
		name: "taken twice by ReceiveAndDelete",
		ops: []history.Op{entityOp("q", plainQueue), sendAt("q", "m", 1, sec, 2*sec, history.OK),
			{Kind: history.Receive, Entity: "q", Mode: history.ReceiveAndDelete, Start: 3 * sec, End: 4 * sec, Outcome: history.OK, Messages: []history.Delivery{{MessageID: "m", Seq: 1, DeliveryCount: 1}}},
			{Kind: history.Receive, Entity: "q", Mode: history.ReceiveAndDelete, Start: 5 * sec, End: 6 * sec, Outcome: history.OK, Messages: []history.Delivery{{MessageID: "m", Seq: 1, DeliveryCount: 2}}}},
		field: func(r *Report) []string { return r.Resurrected }, want: "m in q seq 1 received at 5s after it was consumed at 4s",
	}})
	r := Check([]history.Op{entityOp("q", plainQueue), anon(history.Unknown, sec), anon(history.OK, 3*sec), drained(1, 2)}, Options{})
	if len(r.DuplicatedAllowed) != 1 || !strings.Contains(r.String(), "duplicated 1 (allowed; 1 allowed") {
		t.Fatalf("an allowed duplicate is counted and said to be allowed:\n%s", r)
	}
}

func TestLockRules(t *testing.T) {
	messageLocks := func(r *Report) []string { return r.MessageLockViolations }
	sessionLocks := func(r *Report) []string { return r.SessionLockViolations }
	accept := func(hold string, start, end, until int64) history.Op {
		return history.Op{Kind: history.Accept, Entity: "s", SessionID: "k", Lock: hold, Start: start, End: end, LockedUntil: until, Outcome: history.OK}
	}
	runRuleCases(t, []ruleCase{{
		name: "a second lock while the first is valid",
		ops: story(recvAt("q", 5*sec, 5*sec+1, locked("m", 1, 2, "t2", 8*sec)),
			settleAt(history.Complete, "q", "m", 1, "t2", 7*sec, 7*sec+1, history.OK)),
		field: messageLocks, want: "m in q seq 1 held by proc 0 (received 3s-4s, lock t1 until 6s) and by proc 0 (received 5s-5s, lock t2 until 8s) at once",
	}, {
		name: "a second lock after the first expired",
		ops: story(recvAt("q", 6*sec+1, 7*sec, locked("m", 1, 2, "t2", 9*sec)),
			settleAt(history.Complete, "q", "m", 1, "t2", 8*sec, 8*sec+1, history.OK)),
	}, {
		name: "a second lock after an abandon may have released the first",
		ops: story(settleAt(history.Abandon, "q", "m", 1, "t1", 4*sec+1, 6*sec, history.Unknown),
			recvAt("q", 5*sec, 5*sec+1, locked("m", 1, 2, "t2", 8*sec)),
			settleAt(history.Complete, "q", "m", 1, "t2", 7*sec, 7*sec+1, history.OK)),
	}, {
		name: "a renewal keeps the first lock",
		ops: story(history.Op{Kind: history.RenewLock, Entity: "q", MessageID: "m", Seq: 1, LockToken: "t1", Start: 5 * sec, End: 5*sec + 1, LockedUntil: 9 * sec, Outcome: history.OK},
			recvAt("q", 6*sec+1, 7*sec, locked("m", 1, 2, "t2", 9*sec)),
			settleAt(history.Complete, "q", "m", 1, "t2", 8*sec, 8*sec+1, history.OK)),
		field: messageLocks, want: "m in q seq 1",
	}, {
		name: "a message received under a session lock the holder renews, received again",
		ops: []history.Op{entityOp("s", plainQueue), sendAt("s", "m", 1, 0, sec/2, history.OK),
			accept("h1", sec, sec+1, 4*sec),
			{Kind: history.Receive, Entity: "s", SessionID: "k", Lock: "h1", Start: 2 * sec, End: 2*sec + 1, Outcome: history.OK,
				Messages: []history.Delivery{locked("m", 1, 1, "t1", 4*sec)}},
			{Kind: history.RenewSession, Entity: "s", SessionID: "k", Lock: "h1", Start: 3 * sec, End: 3*sec + 1, LockedUntil: 7 * sec, Outcome: history.OK},
			recvAt("s", 5*sec, 5*sec+1, locked("m", 1, 2, "t2", 9*sec)),
			settleAt(history.Complete, "s", "m", 1, "t2", 6*sec, 6*sec+1, history.OK)},
		field: messageLocks, want: "m in s seq 1 held by proc 0 (received 2s-2s, lock t1 until 4s) and by proc 0 (received 5s-5s, lock t2 until 9s) at once",
	}, {
		name: "a message received under a session lock, received again once the session was closed",
		ops: []history.Op{entityOp("s", plainQueue), sendAt("s", "m", 1, 0, sec/2, history.OK),
			accept("h1", sec, sec+1, 4*sec),
			{Kind: history.Receive, Entity: "s", SessionID: "k", Lock: "h1", Start: 2 * sec, End: 2*sec + 1, Outcome: history.OK,
				Messages: []history.Delivery{locked("m", 1, 1, "t1", 4*sec)}},
			{Kind: history.RenewSession, Entity: "s", SessionID: "k", Lock: "h1", Start: 3 * sec, End: 3*sec + 1, LockedUntil: 7 * sec, Outcome: history.OK},
			{Kind: history.CloseSession, Entity: "s", SessionID: "k", Lock: "h1", Start: 4 * sec, End: 4*sec + 1, Outcome: history.OK},
			recvAt("s", 5*sec, 5*sec+1, locked("m", 1, 2, "t2", 9*sec)),
			settleAt(history.Complete, "s", "m", 1, "t2", 6*sec, 6*sec+1, history.OK)},
	}, {
		name:  "a session accepted twice at once",
		ops:   []history.Op{accept("h1", sec, 2*sec, 10*sec), accept("h2", 3*sec, 4*sec, 12*sec)},
		field: sessionLocks, want: "session k of s held by proc 0 (hold h1 accepted 1s-2s, until 10s) and by proc 0 (hold h2 accepted 3s-4s, until 12s) at once",
	}, {
		name: "a session accepted again after it was closed",
		ops: []history.Op{accept("h1", sec, 2*sec, 10*sec),
			{Kind: history.CloseSession, Entity: "s", SessionID: "k", Lock: "h1", Start: 3 * sec, End: 5 * sec, Outcome: history.OK},
			accept("h2", 4*sec, 4*sec+1, 12*sec)},
	}, {
		name: "a session renewed and accepted again before the renewal ran out",
		ops: []history.Op{accept("h1", sec, 2*sec, 3*sec),
			{Kind: history.RenewSession, Entity: "s", SessionID: "k", Lock: "h1", Start: 2 * sec, End: 2*sec + 1, LockedUntil: 6 * sec, Outcome: history.OK},
			accept("h2", 4*sec, 4*sec+1, 12*sec)},
		field: sessionLocks, want: "session k of s",
	}})
}

func TestDeliveryCountRules(t *testing.T) {
	counts := func(r *Report) []string { return r.DeliveryCountViolations }
	redeliver := func(count int32, more ...history.Op) []history.Op {
		return story(append([]history.Op{
			recvAt("q", 7*sec, 8*sec, locked("m", 1, count, "t2", 10*sec)),
			settleAt(history.Complete, "q", "m", 1, "t2", 9*sec, 9*sec+1, history.OK),
		}, more...)...)
	}
	// givenUpBefore: a receive of another process whose outcome is unknown,
	// given up on before the first delivery's lock (3.99 s).
	givenUpBefore := history.Op{Kind: history.Receive, Entity: "q", Process: 1, Start: 2 * sec, End: 3 * sec, Outcome: history.Unknown}
	runRuleCases(t, []ruleCase{{
		name: "rises by one per delivery",
		ops:  redeliver(2),
	}, {
		name:  "does not rise",
		ops:   redeliver(1),
		field: counts, want: "m in q seq 1: delivery count 1 given to two deliveries",
	}, {
		name:  "rises by two with nobody to explain it",
		ops:   redeliver(3),
		field: counts, want: "m in q seq 1: delivery count rose from 1 to 3 by 8s with 0 receives unanswered in between",
	}, {
		name: "rises by two over a receive whose answer was lost",
		ops:  redeliver(3, history.Op{Kind: history.Receive, Entity: "q", Start: 6*sec + 1, End: 6*sec + 2, Outcome: history.Unknown}),
	}, {
		// Held up in the network, it may have locked the message once
		// the first lock expired.
		name: "rises by two over a receive given up on before, held up in the network",
		ops:  redeliver(3, givenUpBefore),
		late: 4 * time.Second,
	}, {
		name:  "but not over one the network held less long",
		ops:   redeliver(3, givenUpBefore),
		late:  time.Duration(sec / 2),
		field: counts, want: "m in q seq 1: delivery count rose from 1 to 3 by 8s with 0 receives unanswered in between",
	}, {
		name: "delivered beyond MaxDeliveryCount",
		ops: append(redeliver(2), recvAt("q", 11*sec, 12*sec, locked("m", 1, 3, "t3", 14*sec)),
			recvAt("q", 15*sec, 16*sec, locked("m", 1, 4, "t4", 18*sec))),
		field: counts, want: "delivered with count 4, beyond MaxDeliveryCount 3",
	}, {
		name:  "dead-lettered for MaxDeliveryCount before it",
		ops:   story(drainAt("q", true, history.Delivery{MessageID: "m", Seq: 1, DeliveryCount: 1, Reason: ReasonMaxDeliveryCount})),
		field: counts, want: "dead-lettered for MaxDeliveryCount after 1 deliveries, MaxDeliveryCount 3",
	}, {
		name: "left in the queue after using up its deliveries",
		ops: story(recvAt("q", 7*sec, 8*sec, locked("m", 1, 2, "t2", 10*sec)), recvAt("q", 11*sec, 12*sec, locked("m", 1, 3, "t3", 14*sec)),
			drainAt("q", false, history.Delivery{MessageID: "m", Seq: 1, DeliveryCount: 3})),
		field: counts, want: "still in the queue at the end after 3 deliveries, MaxDeliveryCount 3",
	}, {
		name: "dead-lettered when it used them up",
		ops: story(recvAt("q", 7*sec, 8*sec, locked("m", 1, 2, "t2", 10*sec)), recvAt("q", 11*sec, 12*sec, locked("m", 1, 3, "t3", 14*sec)),
			drainAt("q", true, history.Delivery{MessageID: "m", Seq: 1, DeliveryCount: 3, Reason: ReasonMaxDeliveryCount})),
	}})
}

func TestTimeRules(t *testing.T) {
	ttl := history.Settings{DefaultTTL: 10 * sec, DeadLetterOnExpiration: true}
	expiring := func(more ...history.Op) []history.Op {
		return append([]history.Op{entityOp("q", ttl), sendAt("q", "m", 1, sec, 2*sec, history.OK)}, more...)
	}
	ttlRule := func(r *Report) []string { return r.TTLViolations }
	runRuleCases(t, []ruleCase{{
		name:  "enqueue time going backwards in sequence order",
		ops:   []history.Op{drainAt("q", false, history.Delivery{MessageID: "a", Seq: 1, Enqueued: 5000}, history.Delivery{MessageID: "b", Seq: 2, Enqueued: 4000})},
		field: func(r *Report) []string { return r.EnqueueTimeViolations }, want: "q partition 0: seq 2 (b) enqueued at 4000 ms, before seq 1 (a) at 5000 ms",
	}, {
		name: "expired and dead-lettered",
		ops:  expiring(drainAt("q", true, history.Delivery{MessageID: "m", Seq: 1, Reason: ReasonTTLExpired})),
	}, {
		name: "received after it expired",
		ops: expiring(recvAt("q", 13*sec, 14*sec, locked("m", 1, 1, "t1", 16*sec)),
			settleAt(history.Complete, "q", "m", 1, "t1", 15*sec, 15*sec+1, history.OK)),
		field: ttlRule, want: "m in q seq 1: received at 13s, though it expired by 12.01s",
	}, {
		name: "handed out after it expired by the receive after one whose outcome was unknown",
		ops: expiring(
			history.Op{Kind: history.Receive, Entity: "q", Process: 7, Start: 10 * sec, End: 12 * sec, Outcome: history.Unknown},
			func() history.Op {
				op := recvAt("q", 13*sec, 14*sec, locked("m", 1, 1, "t1", 16*sec))
				op.Process = 7
				return op
			}(),
			settleAt(history.Complete, "q", "m", 1, "t1", 15*sec, 15*sec+1, history.OK)),
	}, {
		name: "received after it expired, after another receiver's unknown receive",
		ops: expiring(
			history.Op{Kind: history.Receive, Entity: "q", Process: 8, Start: 10 * sec, End: 12 * sec, Outcome: history.Unknown},
			func() history.Op {
				op := recvAt("q", 13*sec, 14*sec, locked("m", 1, 1, "t1", 16*sec))
				op.Process = 7
				return op
			}(),
			settleAt(history.Complete, "q", "m", 1, "t1", 15*sec, 15*sec+1, history.OK)),
		field: ttlRule, want: "m in q seq 1: received at 13s, though it expired by 12.01s",
	}, {
		name:  "still in the queue long after it expired",
		ops:   expiring(drainAt("q", false, history.Delivery{MessageID: "m", Seq: 1})),
		field: ttlRule, want: "still in the queue at 50s",
	}, {
		name: "still in the queue just after a fault that ended after it expired",
		ops: expiring(history.Op{Kind: history.Fault, Fault: "rolling-restart", Start: 10 * sec, End: 49 * sec},
			drainAt("q", false, history.Delivery{MessageID: "m", Seq: 1})),
	}, {
		name: "still in the queue long after the last fault",
		ops: expiring(history.Op{Kind: history.Fault, Fault: "kill n1", Start: 10 * sec, End: 20 * sec},
			drainAt("q", false, history.Delivery{MessageID: "m", Seq: 1})),
		field: ttlRule, want: "still in the queue at 50s",
	}, {
		name: "dead-lettered as expired before its time",
		ops: []history.Op{entityOp("q", history.Settings{DefaultTTL: 2000 * sec, DeadLetterOnExpiration: true}), sendAt("q", "m", 1, sec, 2*sec, history.OK),
			drainAt("q", true, history.Delivery{MessageID: "m", Seq: 1, Reason: ReasonTTLExpired})},
		field: ttlRule, want: "dead-lettered as expired by 50s, though it could not expire before 33m20.99s",
	}})
}

func TestScheduleNeedsANumber(t *testing.T) {
	runRuleCases(t, []ruleCase{{
		name: "scheduled without a number",
		ops: []history.Op{{Kind: history.Schedule, Entity: "q", MessageID: "m", Start: sec, End: 2 * sec, ScheduledFor: 3 * sec, Outcome: history.OK},
			drainAt("q", false, history.Delivery{MessageID: "m", Seq: 7})},
		field: func(r *Report) []string { return r.ScheduleViolations }, want: "m scheduled at 2s without a sequence number to cancel it by",
	}})
}

func TestSessionStateRule(t *testing.T) {
	state := func(kind history.Kind, v string, start int64, o history.Outcome) history.Op {
		return history.Op{Kind: kind, Entity: "s", SessionID: "k", State: v, Start: start, End: start + sec/2, Outcome: o}
	}
	rule := func(r *Report) []string { return r.SessionStateViolations }
	runRuleCases(t, []ruleCase{{
		name: "rises",
		ops: []history.Op{state(history.GetState, "", sec, history.OK), state(history.SetState, "5", 2*sec, history.OK),
			state(history.SetState, "9", 3*sec, history.Unknown), state(history.GetState, "9", 4*sec, history.OK), state(history.GetState, "9", 5*sec, history.OK)},
	}, {
		name:  "goes back below an acknowledged write",
		ops:   []history.Op{state(history.SetState, "5", 2*sec, history.OK), state(history.SetState, "3", 3*sec, history.Unknown), state(history.GetState, "3", 4*sec, history.OK)},
		field: rule, want: `s session k: read "3" at 4.5s after set-state of "5" was acknowledged at 2.5s`,
	}, {
		name:  "goes back below an earlier read",
		ops:   []history.Op{state(history.SetState, "9", 3*sec, history.Unknown), state(history.GetState, "9", 4*sec, history.OK), state(history.GetState, "", 5*sec, history.OK)},
		field: rule, want: `read "" at 5.5s after get-state of "9"`,
	}, {
		name:  "a value nobody wrote",
		ops:   []history.Op{state(history.SetState, "5", 2*sec, history.Fail), state(history.GetState, "5", 4*sec, history.OK)},
		field: rule, want: `read "5" at 4.5s, which nobody wrote`,
	}})
}

func TestVanishedEntityRule(t *testing.T) {
	sub := history.Settings{Topic: "t", Filter: &history.Filter{Rules: []history.Rule{{}}}}
	created := func(more ...history.Op) []history.Op {
		return append([]history.Op{{Kind: history.Change, Change: history.CreateEntity, Entity: "t/subscriptions/s", Settings: &sub, Start: sec, End: 2 * sec, Outcome: history.OK},
			sendAt("t", "m", 1, 3*sec, 4*sec, history.OK)}, more...)
	}
	deleteAt := func(start int64, o history.Outcome, code string) history.Op {
		return history.Op{Kind: history.Change, Change: history.DeleteEntity, Entity: "t/subscriptions/s", Start: start, End: start + sec, Outcome: o, Code: code}
	}
	runRuleCases(t, []ruleCase{{
		name:  "a delete finds it gone: it vanished, with its messages",
		ops:   created(deleteAt(5*sec, history.Fail, "NOT_FOUND")),
		field: func(r *Report) []string { return r.EntityViolations }, want: "t/subscriptions/s, known to exist, was gone when a delete reached it at 5s-6s",
	}, {
		name: "the final drain finds it gone",
		ops: created(history.Op{Kind: history.Drain, Entity: "t/subscriptions/s", Start: 50 * sec, End: 50 * sec, Outcome: history.Fail, Code: "NOT_FOUND",
			Error: "raftbus: NOT_FOUND: gone"}),
		field: func(r *Report) []string { return r.EntityViolations }, want: "t/subscriptions/s, known to exist, was gone when the final drain reached it at 50s-50s: raftbus: NOT_FOUND: gone",
	}, {
		name: "a second delete after one that may have happened finds it gone",
		ops:  created(deleteAt(5*sec, history.Unknown, ""), deleteAt(7*sec, history.Fail, "NOT_FOUND")),
	}, {
		name:  "a delete that failed otherwise leaves it, and its messages, there",
		ops:   created(deleteAt(5*sec, history.Fail, "SERVER_BUSY")),
		field: lost, want: "m in t/subscriptions/s: send acknowledged at 4s, never delivered nor found",
	}})
}

func TestReplicaAndFaultRules(t *testing.T) {
	digest := func(node string, applied uint64, d string) history.Op {
		return history.Op{Kind: history.Digest, Entity: "q", Partition: 1, Node: node, Applied: applied, Digest: d, Outcome: history.OK}
	}
	replicas := func(r *Report) []string { return r.ReplicaViolations }
	runRuleCases(t, []ruleCase{{
		name: "equal",
		ops:  []history.Op{digest("n1", 40, "aa"), digest("n2", 40, "aa"), digest("n3", 40, "aa")},
	}, {
		name:  "differ at the same index",
		ops:   []history.Op{digest("n1", 40, "aa"), digest("n2", 40, "bb"), digest("n3", 40, "aa")},
		field: replicas, want: "q partition 1: replicas applied the same log and differ: n1 at 40 aa, n2 at 40 bb, n3 at 40 aa",
	}, {
		name:  "one never caught up",
		ops:   []history.Op{digest("n1", 40, "aa"), digest("n2", 12, "bb"), digest("n3", 40, "aa")},
		field: replicas, want: "replicas did not catch up",
	}, {
		name: "a node that ignored SIGTERM",
		ops: []history.Op{{Kind: history.Fault, Fault: "term n2", Start: sec, End: 31 * sec, Outcome: history.Fail, Error: "still running 30s after SIGTERM; killed"},
			{Kind: history.Fault, Fault: "restart n2", Heal: true, Start: 32 * sec, End: 32 * sec}},
		field: func(r *Report) []string { return r.FaultViolations }, want: "term n2 at 1s: still running 30s after SIGTERM; killed",
	}})
}

// TestForwardedMessagesAreJudgedInTheirTarget: a message sent to a queue
// that forwards must be found in the target, once.
func TestForwardedMessagesAreJudgedInTheirTarget(t *testing.T) {
	source := history.Settings{LockDuration: 2 * sec, DuplicateDetection: true, DuplicateWindow: 600 * sec, ForwardTo: "t"}
	setup := []history.Op{entityOp("t", plainQueue), entityOp("f", source)}
	at := func(seqs ...int64) history.Op {
		var ds []history.Delivery
		for _, s := range seqs {
			ds = append(ds, history.Delivery{MessageID: "m", Seq: s, State: "active"})
		}
		return drainAt("t", false, ds...)
	}
	runRuleCases(t, []ruleCase{{
		name: "found once in the target, with a number of its own",
		ops:  append(setup, sendAt("f", "m", 7, sec, 2*sec, history.OK), at(1)),
	}, {
		name:  "not found in the target",
		ops:   append(setup, sendAt("f", "m", 7, sec, 2*sec, history.OK), at()),
		field: func(r *Report) []string { return r.Lost }, want: "m in t: send acknowledged at 2s, never delivered nor found",
	}, {
		name:  "found twice in the target",
		ops:   append(setup, sendAt("f", "m", 7, sec, 2*sec, history.Unknown), sendAt("f", "m", 7, 3*sec, 4*sec, history.OK), at(1, 2)),
		field: func(r *Report) []string { return r.Duplicated }, want: "m in t stored 2 times (seqs [1 2]) from 2 sends that may have happened, under duplicate detection",
	}})
}
