package engine

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// stamped is cmd as a leader proposes it, for engines driven by hand.
func stamped(cmd *enginev1.Command, now int64) *enginev1.Command {
	cmd.NowUnixMs, cmd.EngineVersion, cmd.TokenSeed = now, Version, bytes.Repeat([]byte{7}, 16)
	return cmd
}

func TestABodyOnDiskIsHandedOutByItsReferenceAndPinsItsEntryUntilSettled(t *testing.T) {
	h := newHarness(t, nil)
	h.send(&raftbusv1.Message{MessageId: "a", Body: []byte("first body")})
	firstEntry := h.log.next
	h.send(&raftbusv1.Message{MessageId: "b", Body: []byte("second body")}, &raftbusv1.Message{MessageId: "c"})
	if got := h.e.OldestBodyRef(); got != firstEntry {
		t.Fatalf("oldest body reference %d, want entry %d", got, firstEntry)
	}
	// The engine holds no body in memory, only where it lies.
	h.e.entities[testQueue].main.all.ascend(0, func(m *message) bool {
		if m.body != nil || (m.id != "c") != m.ref.onDisk() {
			t.Fatalf("message %s holds body %q, reference %+v", m.id, m.body, m.ref)
		}
		return true
	})
	if c := h.counts(); c.GetSizeInBytes() < int64(len("first body")+len("second body")) {
		t.Fatalf("size %d does not count the bodies on disk", c.GetSizeInBytes())
	}

	// Received by hand: the bodies are pending, for the caller to read.
	res := h.e.ApplyStored(stamped(lockCmd(mainQueue, peekLock, 10), h.now), nil)
	got := res.GetLock().GetMessages()
	pending := h.e.TakeBodies()
	if len(got) != 3 || len(pending) != 2 || pending[0].Message != got[0].GetMessage() || pending[1].Message != got[1].GetMessage() {
		t.Fatalf("received %d, pending %+v", len(got), pending)
	}
	if got[0].GetMessage().GetBody() != nil || pending[0].Ref.Length != uint32(len("first body")) {
		t.Fatalf("first message body %q, reference %+v", got[0].GetMessage().GetBody(), pending[0].Ref)
	}
	if h.e.TakeBodies() != nil {
		t.Fatal("pending bodies handed out twice")
	}
	h.log.resolve(t, pending)
	if string(got[1].GetMessage().GetBody()) != "second body" {
		t.Fatalf("resolved body %q", got[1].GetMessage().GetBody())
	}

	h.settle(got[0], enginev1.Disposition_DISPOSITION_COMPLETE)
	if got := h.e.OldestBodyRef(); got != firstEntry+1 {
		t.Fatalf("after the first entry's message was completed the oldest reference is %d, want %d", got, firstEntry+1)
	}
	h.settle(got[1], enginev1.Disposition_DISPOSITION_COMPLETE)
	if got := h.e.OldestBodyRef(); got != 0 {
		t.Fatalf("no body on disk is referenced, yet the oldest reference is %d", got)
	}
}

func TestABodyReferenceMustMatchItsBody(t *testing.T) {
	h := newHarness(t, nil)
	msg := &raftbusv1.Message{MessageId: "a", Body: []byte("four")}
	cmd := stamped(sendCmd(msg), h.now)
	h.e.ApplyStored(cmd, []BodyRef{{Index: 9, Offset: 0, Length: 3}})
	if h.e.OldestBodyRef() != 0 {
		t.Fatal("a reference of the wrong length was kept")
	}
	if ms := h.peek(mainQueue, 0, 10); len(ms) != 1 || string(ms[0].GetMessage().GetBody()) != "four" {
		t.Fatalf("peeked %v, want the body kept in memory", ms)
	}
}

func TestSnapshotKeepsBodyReferencesAndTheDigestIgnoresWhereBodiesLie(t *testing.T) {
	onDisk := newHarness(t, nil)
	inMemory := newHarness(t, nil)
	inMemory.inline = true
	for _, h := range []*harness{onDisk, inMemory} {
		for i := range 5 {
			h.send(&raftbusv1.Message{MessageId: fmt.Sprint(i), Body: []byte(fmt.Sprint("body ", i))})
		}
		h.ok(receiveWithID("r1", receiveDel, 2))
	}
	if onDisk.e.Digest() != inMemory.e.Digest() {
		t.Fatal("replicas that hold the same messages, one with bodies on disk, have different digests")
	}
	var snap bytes.Buffer
	if err := onDisk.e.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(snap.Bytes(), []byte("body 3")) {
		t.Fatal("the snapshot holds a body that lies on disk")
	}
	restored := New(0, 1)
	if err := restored.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	if restored.Digest() != onDisk.e.Digest() || restored.OldestBodyRef() != onDisk.e.OldestBodyRef() || restored.OldestBodyRef() == 0 {
		t.Fatalf("restored: oldest reference %d, want %d", restored.OldestBodyRef(), onDisk.e.OldestBodyRef())
	}
	checkInvariants(t, restored)

	// The receipt of the receive-and-delete answers a repeat with the
	// same bodies, from the log: it keeps their entries pinned.
	onDisk.e = restored
	again := onDisk.ok(receiveWithID("r1", receiveDel, 2)).GetLock().GetMessages()
	if len(again) != 2 || string(again[0].GetMessage().GetBody()) != "body 0" || string(again[1].GetMessage().GetBody()) != "body 1" {
		t.Fatalf("the repeated receive answered %v", again)
	}
	if onDisk.e.OldestBodyRef() == 0 || onDisk.e.OldestBodyRef() > onDisk.log.next-4 {
		t.Fatalf("oldest reference %d: the receipt's bodies are not pinned", onDisk.e.OldestBodyRef())
	}
}

func TestTopicCopiesShareTheirBodyOnDisk(t *testing.T) {
	h := newTopicHarness(t, nil)
	h.log = &fakeLog{entries: map[uint64][]byte{}}
	h.subscribe("a", nil)
	h.subscribe("b", nil)
	h.ok(&enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: testTopic,
		Messages: []*raftbusv1.Message{{MessageId: "m", Body: []byte("shared")}}}}})
	for _, sub := range []string{"a", "b"} {
		ms, err := h.e.Peek(subPath(sub), mainQueue, 0, 10, 0)
		h.log.resolve(t, h.e.TakeBodies())
		if err != nil || len(ms) != 1 || string(ms[0].GetMessage().GetBody()) != "shared" {
			t.Fatalf("subscription %s: %v %v", sub, ms, err)
		}
	}
	if h.e.pins.runs[h.e.pins.head].n != 2 {
		t.Fatalf("pins %+v, want both copies counted", h.e.pins.runs)
	}
	h.ok(deleteCmd(testTopic))
	if got := h.e.OldestBodyRef(); got != 0 {
		t.Fatalf("the topic is gone, yet entry %d is pinned", got)
	}
}

func TestExpandedSnapshotCarriesTheBodiesAndRestoresWithoutTheLog(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 20 {
		h.send(&raftbusv1.Message{MessageId: fmt.Sprint(i), Body: bytes.Repeat([]byte{byte('a' + i)}, 100+i*40)})
	}
	h.ok(receiveWithID("r1", receiveDel, 3))
	var snap bytes.Buffer
	if err := h.e.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	read := func(r BodyRef) ([]byte, error) {
		data := h.log.entries[r.Index]
		return data[r.Offset : r.Offset+r.Length], nil
	}
	size, err := ExpandBodies(bytes.NewReader(snap.Bytes()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var expanded bytes.Buffer
	n, err := ExpandBodies(bytes.NewReader(snap.Bytes()), &expanded, read)
	if err != nil || n != size || int64(expanded.Len()) != size {
		t.Fatalf("expanded %d bytes (%v), %d written, sized %d beforehand", n, err, expanded.Len(), size)
	}
	peer := New(0, 1)
	if err := peer.Restore(&expanded); err != nil {
		t.Fatal(err)
	}
	if peer.OldestBodyRef() != 0 || peer.Digest() != h.e.Digest() {
		t.Fatalf("the peer refers to entry %d, or holds other state", peer.OldestBodyRef())
	}
	ms, err := peer.Peek(testQueue, mainQueue, 0, 100, 0)
	if err != nil || len(ms) != 17 || len(peer.TakeBodies()) != 0 || !bytes.Equal(ms[16].GetMessage().GetBody(), bytes.Repeat([]byte{'t'}, 100+19*40)) {
		t.Fatalf("the peer peeked %d messages (%v)", len(ms), err)
	}

	failing := func(BodyRef) ([]byte, error) { return nil, fmt.Errorf("disk gone") }
	if _, err := ExpandBodies(bytes.NewReader(snap.Bytes()), io.Discard, failing); err == nil {
		t.Fatal("a body that could not be read was left out without an error")
	}
}
