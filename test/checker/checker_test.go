package checker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/test/history"
)

const ms = int64(time.Millisecond)

// b builds hand-made histories: each op takes the next 10 ms slot unless
// its times are given.
type b struct {
	ops []history.Op
	t   int64
}

func (h *b) add(op history.Op) *b {
	if op.Start == 0 && op.End == 0 {
		h.t += 10 * ms
		op.Start, op.End = h.t, h.t+5*ms
	}
	if op.Outcome == "" && op.Kind != history.Fault && op.Kind != history.Drain {
		op.Outcome = history.OK
	}
	h.ops = append(h.ops, op)
	return h
}

func send(id string, seq int64) history.Op {
	return history.Op{Kind: history.Send, Entity: "q", MessageID: id, Seq: seq}
}

func recv(ds ...history.Delivery) history.Op {
	return history.Op{Kind: history.Receive, Entity: "q", Messages: ds}
}

func dlv(id string, seq int64) history.Delivery { return history.Delivery{MessageID: id, Seq: seq} }

func complete(id string, seq int64) history.Op {
	return history.Op{Kind: history.Complete, Entity: "q", MessageID: id, Seq: seq}
}

func drain(ds ...history.Delivery) history.Op {
	return history.Op{Kind: history.Drain, Entity: "q", Messages: ds, Start: 1 << 40, End: 1<<40 + 1}
}

// clean is a history that breaks no rule: sends, a fault, a failed and an
// unknown send, receives and completes, one message left for the drain,
// one in the dead-letter queue, a session processed in order and a
// scheduled message cancelled in time.
func clean() *b {
	h := &b{}
	h.add(send("a", 1)).add(send("b", 2))
	h.add(history.Op{Kind: history.Fault, Fault: "kill n1", Start: h.t + 1, End: h.t + 1})
	h.add(history.Op{Kind: history.Send, Entity: "q", MessageID: "x", Outcome: history.Fail})
	h.add(history.Op{Kind: history.Send, Entity: "q", MessageID: "y", Outcome: history.Unknown})
	h.add(send("c", 3))
	h.add(recv(dlv("a", 1), dlv("b", 2))).add(complete("a", 1))
	h.add(history.Op{Kind: history.Send, Entity: "s", MessageID: "s1", SessionID: "k", Seq: 1})
	h.add(history.Op{Kind: history.Send, Entity: "s", MessageID: "s2", SessionID: "k", Seq: 2})
	h.add(history.Op{Kind: history.Receive, Entity: "s", Messages: []history.Delivery{{MessageID: "s1", Seq: 1, SessionID: "k"}}})
	h.add(history.Op{Kind: history.Complete, Entity: "s", MessageID: "s1", SessionID: "k", Seq: 1})
	h.add(history.Op{Kind: history.Receive, Entity: "s", Messages: []history.Delivery{{MessageID: "s2", Seq: 2, SessionID: "k"}}})
	h.add(history.Op{Kind: history.Complete, Entity: "s", MessageID: "s2", SessionID: "k", Seq: 2})
	h.add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "z", Seq: 4, ScheduledFor: h.t + 10_000*ms})
	h.add(history.Op{Kind: history.Cancel, Entity: "q", MessageID: "z", Seq: 4})
	h.add(drain(dlv("c", 3)))
	h.add(history.Op{Kind: history.Drain, Entity: "q", DLQ: true, Messages: []history.Delivery{dlv("b", 2)}, Start: 1 << 41, End: 1<<41 + 1})
	return h
}

func TestCleanHistoryPasses(t *testing.T) {
	r := Check(clean().ops, Options{})
	if !r.OK() {
		t.Fatalf("clean history reported violations:\n%s", r)
	}
	if r.Acknowledged != 6 || r.Faults != 1 {
		t.Errorf("acknowledged %d faults %d, want 6 and 1:\n%s", r.Acknowledged, r.Faults, r)
	}
}

func TestEachRuleCatchesItsViolation(t *testing.T) {
	cases := []struct {
		name  string
		ops   func() []history.Op
		field func(*Report) []string
		want  string
	}{{
		name: "acknowledged send never seen is lost",
		ops: func() []history.Op {
			return clean().add(send("gone", 9)).ops
		},
		field: func(r *Report) []string { return r.Lost },
		want:  "gone",
	}, {
		name: "scheduled message neither delivered nor cancelled is lost",
		ops: func() []history.Op {
			return clean().add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "later", Seq: 9, ScheduledFor: 1}).ops
		},
		field: func(r *Report) []string { return r.Lost },
		want:  "later",
	}, {
		name: "delivery after acknowledged complete",
		ops: func() []history.Op {
			return clean().add(recv(dlv("a", 1))).ops
		},
		field: func(r *Report) []string { return r.Resurrected },
		want:  "a in q seq 1 received",
	}, {
		name: "completed message still there at the drain",
		ops: func() []history.Op {
			return clean().add(history.Op{Kind: history.Drain, Entity: "q", Messages: []history.Delivery{dlv("a", 1)}, Start: 1 << 42, End: 1<<42 + 1}).ops
		},
		field: func(r *Report) []string { return r.Resurrected },
		want:  "a in q seq 1 drained",
	}, {
		name: "sequence number handed out twice",
		ops: func() []history.Op {
			return clean().add(recv(dlv("twin", 3))).ops
		},
		field: func(r *Report) []string { return r.SequenceViolations },
		want:  "seq 3 handed to both",
	}, {
		name: "message delivered with another number than acknowledged",
		ops: func() []history.Op {
			return clean().add(send("m", 10)).add(recv(dlv("m", 11))).ops
		},
		field: func(r *Report) []string { return r.SequenceViolations },
		want:  "acknowledged with seq 10, delivered with seq 11",
	}, {
		name: "numbers not increasing in acknowledged order",
		ops: func() []history.Op {
			h := clean()
			return h.add(send("m", 20)).add(send("n", 15)).add(recv(dlv("m", 20), dlv("n", 15))).ops
		},
		field: func(r *Report) []string { return r.SequenceViolations },
		want:  "n got seq 15 after m got seq 20",
	}, {
		name: "duplicate answered with another message's number",
		ops: func() []history.Op {
			dup := send("a", 3) // "a" got 1; 3 is c's
			dup.Duplicate = true
			return clean().add(dup).ops
		},
		field: func(r *Report) []string { return r.SequenceViolations },
		want:  "seq 3 handed to both c and a",
	}, {
		name: "session processed out of order",
		ops: func() []history.Op {
			h := clean()
			h.add(history.Op{Kind: history.Send, Entity: "s", MessageID: "s3", SessionID: "j", Seq: 3})
			h.add(history.Op{Kind: history.Send, Entity: "s", MessageID: "s4", SessionID: "j", Seq: 4})
			h.add(history.Op{Kind: history.Receive, Entity: "s", Messages: []history.Delivery{{MessageID: "s4", Seq: 4, SessionID: "j"}, {MessageID: "s3", Seq: 3, SessionID: "j"}}})
			h.add(history.Op{Kind: history.Complete, Entity: "s", MessageID: "s4", SessionID: "j", Seq: 4})
			h.add(history.Op{Kind: history.Complete, Entity: "s", MessageID: "s3", SessionID: "j", Seq: 3})
			return h.ops
		},
		field: func(r *Report) []string { return r.OrderViolations },
		want:  "session j: s3 (seq 3) processed after s4 (seq 4)",
	}, {
		name: "scheduled message delivered early",
		ops: func() []history.Op {
			h := clean()
			h.add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "early", Seq: 30, ScheduledFor: h.t + 1000*ms})
			return h.add(recv(dlv("early", 31))).ops
		},
		field: func(r *Report) []string { return r.ScheduleViolations },
		want:  "early due at",
	}, {
		name: "message cancelled in time delivered",
		ops: func() []history.Op {
			h := clean()
			due := h.t + 50*ms
			h.add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "undead", Seq: 30, ScheduledFor: due})
			h.add(history.Op{Kind: history.Cancel, Entity: "q", MessageID: "undead", Seq: 30})
			h.t = due + 100*ms
			return h.add(recv(dlv("undead", 31))).ops
		},
		field: func(r *Report) []string { return r.ScheduleViolations },
		want:  "undead cancelled at",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ops(), Options{})
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

func TestDuplicateAnsweredWithItsFirstCopysNumberIsNotAViolation(t *testing.T) {
	h := clean()
	dup := send("b", 2) // a repeat of b, answered as b's first copy was
	dup.Duplicate = true
	h.add(dup)
	if r := Check(h.ops, Options{}); !r.OK() {
		t.Fatalf("a duplicate carries its first copy's number, older than those acknowledged since:\n%s", r)
	}
}

func TestCancelRacingActivationIsNotAViolation(t *testing.T) {
	h := clean()
	due := h.t + 5*ms
	h.add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "race", Seq: 40, ScheduledFor: due})
	h.add(history.Op{Kind: history.Cancel, Entity: "q", MessageID: "race", Seq: 40})
	h.add(recv(dlv("race", 41)))
	if r := Check(h.ops, Options{}); !r.OK() {
		t.Fatalf("a cancel acknowledged after the due time may lose the race:\n%s", r)
	}
}

// A drain pages through a partition while the broker works on: a
// scheduled message that comes due meanwhile is seen under its schedule
// number and, enqueued, under its new one. One copy, not a duplicate; a
// second schedule number seen enqueued is one.
func TestScheduledMessageSeenBeforeAndAfterItsActivationIsOneCopy(t *testing.T) {
	h := clean()
	due := h.t + 5*ms
	h.add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "due", Seq: 1<<48 | 40, ScheduledFor: due})
	scheduled := history.Delivery{MessageID: "due", Seq: 1<<48 | 40, State: "scheduled"}
	active := history.Delivery{MessageID: "due", Seq: 1<<48 | 45, State: "active"}
	if r := Check(h.add(drain(scheduled, active)).ops, Options{}); !r.OK() {
		t.Fatalf("a message seen scheduled and then enqueued by one drain:\n%s", r)
	}

	h = clean()
	h.add(history.Op{Kind: history.Schedule, Entity: "q", MessageID: "due", Seq: 1<<48 | 40, ScheduledFor: due})
	again := history.Delivery{MessageID: "due", Seq: 1<<48 | 46, State: "active"}
	r := Check(h.add(drain(scheduled, active, again)).ops, Options{})
	if len(r.Duplicated) != 1 {
		t.Fatalf("two enqueued copies of one schedule: want one duplicate violation, got %q\n%s", r.Duplicated, r)
	}
}

func TestOverlappingSendsAreNotOrdered(t *testing.T) {
	h := clean()
	h.add(history.Op{Kind: history.Send, Entity: "q", MessageID: "p", Seq: 51, Start: h.t + ms, End: h.t + 9*ms, Outcome: history.OK})
	h.add(history.Op{Kind: history.Send, Entity: "q", MessageID: "o", Seq: 50, Start: h.t + 2*ms, End: h.t + 8*ms, Outcome: history.OK})
	h.add(recv(dlv("o", 50), dlv("p", 51))).add(complete("o", 50)).add(complete("p", 51))
	if r := Check(h.ops, Options{}); !r.OK() {
		t.Fatalf("concurrent sends may be numbered in either order:\n%s", r)
	}
}

func TestAvailabilityPerFault(t *testing.T) {
	ok := func(end int64) history.Op {
		return history.Op{Kind: history.Send, Entity: "q", MessageID: "m" + time.Duration(end).String(), Start: end - ms, End: end, Outcome: history.OK}
	}
	var ops []history.Op
	ops = append(ops, ok(100*ms), ok(200*ms))
	ops = append(ops, history.Op{Kind: history.Fault, Fault: "kill n1", Start: 250 * ms, End: 250 * ms})
	ops = append(ops, history.Op{Kind: history.Send, Entity: "q", MessageID: "lost-in-outage", Start: 260 * ms, End: 900 * ms, Outcome: history.Unknown})
	ops = append(ops, ok(1700*ms), ok(1800*ms))
	ops = append(ops, history.Op{Kind: history.Fault, Fault: "pause n2", Start: 2000 * ms, End: 2000 * ms})
	ops = append(ops, ok(2100*ms))
	ops = append(ops, history.Op{Kind: history.Fault, Fault: "kill all", Start: 2200 * ms, End: 2200 * ms})
	ops = append(ops, history.Op{Kind: history.Send, Entity: "q", MessageID: "late", Start: 2300 * ms, End: 5100 * ms, Outcome: history.Fail})
	r := Check(ops, Options{})
	if r.MaxUnavailable != 3000*time.Millisecond {
		t.Errorf("max unavailable %v, want 3s (from the last success to the end of the run)", r.MaxUnavailable)
	}
	// Each outage counts from its fault: kill n1 from 250 ms to the next
	// success; pause n2 from its start to the next success; kill all from
	// its start to the end, not the pause's 100 ms before it.
	want := []time.Duration{1450 * time.Millisecond, 100 * time.Millisecond, 2900 * time.Millisecond}
	if len(r.Windows) != len(want) {
		t.Fatalf("windows %+v, want %d", r.Windows, len(want))
	}
	for i, w := range want {
		if r.Windows[i].Unavailable != w {
			t.Errorf("fault %q: unavailable %v, want %v", r.Windows[i].Fault, r.Windows[i].Unavailable, w)
		}
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range clean().ops {
		rec.Record(op)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != len(clean().ops) {
		t.Fatalf("read %d ops, wrote %d", len(ops), len(clean().ops))
	}
	if r := Check(ops, Options{}); !r.OK() || r.Acknowledged != 6 {
		t.Fatalf("history changed in the round trip:\n%s", r)
	}
}

// A whole-cluster kill whose last success came just after it owns the
// outage until a later fault strikes; the later fault owns only the rest.
func TestAvailabilitySplitsAnOutageAtTheNextFault(t *testing.T) {
	ok := func(end int64) history.Op {
		return history.Op{Kind: history.Send, Entity: "q", MessageID: "m" + time.Duration(end).String(), Start: end - ms, End: end, Outcome: history.OK}
	}
	ops := []history.Op{
		ok(100 * ms),
		{Kind: history.Fault, Fault: "kill-all", Start: 150 * ms, End: 150 * ms},
		ok(160 * ms), // answered before the kill reached it
		{Kind: history.Fault, Fault: "kill n4", Start: 7000 * ms, End: 7000 * ms},
		ok(8000 * ms),
	}
	r := Check(ops, Options{})
	want := map[string]time.Duration{"kill-all": 6840 * time.Millisecond, "kill n4": 1000 * time.Millisecond}
	for _, w := range r.Windows {
		if w.Unavailable != want[w.Fault] {
			t.Errorf("fault %q: unavailable %v, want %v", w.Fault, w.Unavailable, want[w.Fault])
		}
	}
}
