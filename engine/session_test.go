package engine

import (
	"bytes"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The scenarios of sessions are in testdata/sessions.txt.

const sessionLockLost = raftbusv1.ErrorReason_ERROR_REASON_SESSION_LOCK_LOST

func TestSessionOnlyMetaIsTheProtobufEncoding(t *testing.T) {
	for _, id := range []string{"s", "session-0001", string(bytes.Repeat([]byte("é"), maxSessionIDLength))} {
		want, err := deterministic.Marshal(&raftbusv1.Message{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionOnlyMeta(id); !bytes.Equal(got, want) {
			t.Fatalf("%q: encoded %x, want %x", id, got, want)
		}
		if got, ok := sessionOnlyID(want); !ok || got != id {
			t.Fatalf("%q: decoded %q %v", id, got, ok)
		}
	}
	other, _ := deterministic.Marshal(&raftbusv1.Message{SessionId: "s", Subject: "x"})
	if _, ok := sessionOnlyID(other); ok {
		t.Fatal("decoded a meta with more than a session id")
	}
}

func TestSessionStateIsRefusedOnceTheLockExpiredEvenBeforeAnyCommand(t *testing.T) {
	h := newSessionHarness(t, nil)
	s := h.accept("a")
	h.ok(setStateCmd(s, []byte("mine")))
	st, err := h.e.GetSessionState(testQueue, "a", s.token, h.now)
	if err != nil || string(st) != "mine" {
		t.Fatalf("state %q %v while held", st, err)
	}
	st[0] = 'X' // the caller's copy, not the engine's
	h.advance(31 * time.Second)
	if _, err := h.e.GetSessionState(testQueue, "a", s.token, h.now); err == nil || err.(*Error).Reason != sessionLockLost {
		t.Fatalf("read after the lock expired: %v, want SESSION_LOCK_LOST", err)
	}
	t2 := h.accept("a")
	if st, _ := h.e.GetSessionState(testQueue, "a", t2.token, h.now); string(st) != "mine" {
		t.Fatalf("state %q: a caller's change to its copy reached the engine", st)
	}
}
