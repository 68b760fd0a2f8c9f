package engine

import (
	"bytes"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestSnapshotRestoresEveryState(t *testing.T) {
	h := newHarness(t, &raftbusv1.QueueProperties{RequiresDuplicateDetection: ptr(true), DefaultMessageTimeToLive: dur(time.Hour)})
	h.sendN(6)
	h.send(&raftbusv1.Message{MessageId: "later", Subject: "s", ScheduledEnqueueTime: timestamp(h.now + 60_000)})
	ms := h.lock(3)
	h.settle(ms[0], deferIt)
	h.settle(ms[1], deadLetterIt)
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	restored := New(0, 1)
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, restored)
	if restored.Digest() != h.e.Digest() {
		t.Fatal("digest differs after restore")
	}
	a, _ := h.e.RuntimeProperties(testQueue)
	b, _ := restored.RuntimeProperties(testQueue)
	if a.String() != b.String() {
		t.Fatalf("counts %v, restored %v", a, b)
	}
	// The restored engine honours the old lock and the remembered ids.
	h.e = restored
	h.settle(ms[2], complete)
	if r := h.send(&raftbusv1.Message{MessageId: "m0"}); !r[0].GetDuplicate() || r[0].GetSequenceNumber() != 1 {
		t.Fatalf("duplicate detection forgot an id or its first copy: %v", r[0])
	}
}

func TestRestoreRejectsADamagedSnapshotAndKeepsTheState(t *testing.T) {
	h := newHarness(t, nil)
	h.sendN(3)
	var buf bytes.Buffer
	if err := h.e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	before := h.e.Digest()
	for name, data := range map[string][]byte{
		"empty":     nil,
		"truncated": snap[:len(snap)-3],
		"garbage":   []byte("not a snapshot at all"),
	} {
		if err := h.e.Restore(bytes.NewReader(data)); err == nil {
			t.Fatalf("%s snapshot restored", name)
		}
		if h.e.Digest() != before {
			t.Fatalf("a failed restore (%s) changed the state", name)
		}
	}
}

// TestAnImageIsTheStateItWasCapturedAt captures images along a seeded
// workload of every kind of command and encodes each while the engine
// applies the next hundreds of commands, as a replica persists a snapshot
// while it applies: the bytes must be those of a snapshot taken at the
// capture (under -race, a write to anything an image shares is also
// reported).
func TestAnImageIsTheStateItWasCapturedAt(t *testing.T) {
	e := New(0, 1)
	for _, cmd := range workloadSetup() {
		e.Apply(cmd)
	}
	w := newWorkload(7)
	w.transfers = func() []Transfer { return e.Transfers(1+w.rng.IntN(8), 1<<20) }
	changed := 0
	for round := range 20 {
		for range 150 {
			cmd := w.next()
			w.observe(cmd, e.Apply(cmd))
		}
		var want bytes.Buffer
		if err := e.Snapshot(&want); err != nil {
			t.Fatal(err)
		}
		im := e.Capture()
		encoded := make(chan []byte)
		go func() {
			var got bytes.Buffer
			if err := im.Encode(&got); err != nil {
				t.Error(err)
			}
			encoded <- got.Bytes()
		}()
		for range 300 {
			cmd := w.next()
			w.observe(cmd, e.Apply(cmd))
		}
		got := <-encoded
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("round %d: the image encoded while the engine applied differs from the state it was captured at", round)
		}
		if again := e.Capture(); again.Digest() != im.Digest() {
			changed++
		}
	}
	// The workload must have changed the state after each capture, or the
	// comparison above proves nothing.
	if changed < 18 {
		t.Fatalf("the state changed after only %d of 20 captures", changed)
	}
}
