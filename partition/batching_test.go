package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestCommandsArrivingWhileAnEntryIsOnItsWayShareTheNext holds the state
// machine so that a leader's one entry in flight cannot finish, sends more
// commands meanwhile, and checks that they went into one more entry, not
// one each.
func TestCommandsArrivingWhileAnEntryIsOnItsWayShareTheNext(t *testing.T) {
	p := openAlone(t, func(c *partition.Config) { c.MaxEntriesInFlight = 1 })
	releaseFSM := holdStateMachine(t, p)

	base := p.Info().CommitIndex
	const later = 10
	errs := make(chan error, later+1)
	send := func() {
		_, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{Body: []byte("x")}))
		errs <- err
	}
	go send()
	await.Until(t, 10*time.Second, "the first send to commit", func() bool { return p.Info().CommitIndex == base+1 })
	for range later {
		go send()
	}
	// The proposer holds the first of them while it waits.
	await.Until(t, 10*time.Second, "the later sends to queue", func() bool { return p.QueuedProposals() == later-1 })
	if got := p.Info().CommitIndex; got != base+1 {
		t.Fatalf("commit index %d while the first entry is on its way, want %d: entries were proposed past the limit", got, base+1)
	}
	releaseFSM()
	for range later + 1 {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if got := p.Info().CommitIndex; got != base+2 {
		t.Fatalf("commit index %d after the sends, want %d: the %d later sends took %d entries", got, base+2, later, got-base-1)
	}
}
