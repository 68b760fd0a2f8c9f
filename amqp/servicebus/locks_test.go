package servicebus

import (
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
)

func TestLocksForgetLocksLongEnded(t *testing.T) {
	var ls locks
	ended := &client.ReceivedMessage{LockToken: [16]byte{1}, LockedUntil: time.Now().Add(-2 * pruneAfter)}
	held := &client.ReceivedMessage{LockToken: [16]byte{2}, LockedUntil: time.Now().Add(time.Minute)}
	ls.add(entity{}, nil, ended)
	ls.add(entity{}, nil, held)
	for i := 0; i < pruneEvery; i++ {
		ls.add(entity{}, nil, &client.ReceivedMessage{LockToken: [16]byte{3, byte(i)}, LockedUntil: time.Now().Add(time.Minute)})
	}
	if ls.get(ended.LockToken) != nil {
		t.Error("a lock that ended long ago is still kept")
	}
	if ls.get(held.LockToken) == nil {
		t.Error("a held lock was forgotten")
	}
	ls.remove(held.LockToken)
	if ls.get(held.LockToken) != nil {
		t.Error("a settled lock is still kept")
	}
}

func TestReleasedMessagesGoOutAgainUntilTheirLockNearlyEnds(t *testing.T) {
	now := time.Now()
	r := newReleasedMessages()
	added := r.wait()
	fresh := &client.ReceivedMessage{LockToken: [16]byte{1}, LockedUntil: now.Add(time.Minute)}
	ending := &client.ReceivedMessage{LockToken: [16]byte{2}, LockedUntil: now.Add(releasedHold / 2)}
	other := &client.ReceivedMessage{LockToken: [16]byte{3}, LockedUntil: now.Add(2 * time.Minute)}
	r.add(fresh)
	r.add(ending)
	r.add(other)
	select {
	case <-added:
	default:
		t.Fatal("adding did not signal")
	}
	if next := r.next(); !next.Equal(ending.LockedUntil.Add(-releasedHold)) {
		t.Fatalf("next expiry %v", next)
	}
	again, expiring := r.take(1, now)
	if len(again) != 1 || again[0] != fresh || len(expiring) != 1 || expiring[0] != ending {
		t.Fatalf("take gave %v again and %v expiring", again, expiring)
	}
	if rest := r.all(); len(rest) != 1 || rest[0] != other {
		t.Fatalf("kept %v", rest)
	}
}
