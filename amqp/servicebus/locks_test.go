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
	ls.add(nil, ended)
	ls.add(nil, held)
	for i := 0; i < pruneEvery; i++ {
		ls.add(nil, &client.ReceivedMessage{LockToken: [16]byte{3, byte(i)}, LockedUntil: time.Now().Add(time.Minute)})
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
