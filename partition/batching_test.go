package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
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

// TestTheCommandsOfOneCallShareAnEntry has an idle partition take many
// commands in one ApplyAll: the proposer, woken by the call, must find them
// all, not propose the first few alone and leave the rest a round behind.
func TestTheCommandsOfOneCallShareAnEntry(t *testing.T) {
	p := openAlone(t, nil)
	for round := range 20 {
		cmds := make([]*enginev1.Command, 200)
		for i := range cmds {
			cmds[i] = sendCmd(&raftbusv1.Message{Body: []byte("x")})
		}
		base := p.Info().CommitIndex
		for i, a := range p.ApplyAll(context.Background(), cmds) {
			if a.Err != nil {
				t.Fatalf("round %d: command %d: %v", round, i, a.Err)
			}
		}
		if got := p.Info().CommitIndex; got != base+1 {
			t.Fatalf("round %d: the call's %d commands took %d entries, want 1", round, len(cmds), got-base)
		}
	}
}

// TestAWaitingReceiveLocksInTheEntryOfTheSend has a receive wait on an
// empty queue, then sends: the receive gets the message from the send's
// own entry (one entry for both, not the send's and then the lock's). A
// second receive, waiting on another queue of the partition, rides along,
// finds nothing and goes on waiting.
func TestAWaitingReceiveLocksInTheEntryOfTheSend(t *testing.T) {
	// Riders need the partition quiet for a while; here, no wait.
	p := openAlone(t, func(c *partition.Config) { partition.QuietForRiders(c, -1) })
	configure(t, p, nil)
	ctx := context.Background()
	if _, err := p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
		EntityPath: "other", Properties: &raftbusv1.QueueProperties{Name: "other"},
	}}}); err != nil {
		t.Fatal(err)
	}
	type received struct {
		msgs []*raftbusv1.ReceivedMessage
		err  error
	}
	got, other := make(chan received, 1), make(chan received, 1)
	otherCtx, cancelOther := context.WithCancel(ctx)
	defer cancelOther()
	go func() {
		msgs, err := p.Receive(ctx, lockCmd(5), 30*time.Second)
		got <- received{msgs, err}
	}()
	go func() {
		msgs, err := p.Receive(otherCtx, &enginev1.Lock{EntityPath: "other", MaxMessages: 1}, 30*time.Second)
		other <- received{msgs, err}
	}()
	await.Until(t, 10*time.Second, "both receives to wait", func() bool { return p.Riders() == 2 })

	base := p.Info().CommitIndex
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: "m", Body: []byte("x")})); err != nil {
		t.Fatalf("send: %v", err)
	}
	r := <-got
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].GetMessage().GetMessageId() != "m" || len(r.msgs[0].GetLockToken()) == 0 {
		t.Fatalf("receive: %v, %v", r.msgs, r.err)
	}
	if n := p.Info().CommitIndex - base; n != 1 {
		t.Fatalf("the send and the receive took %d entries, want 1", n)
	}
	// The other queue's receive found nothing in that entry and waits on.
	await.Until(t, 10*time.Second, "the other receive to wait again", func() bool { return p.Riders() == 1 })
	select {
	case r := <-other:
		t.Fatalf("the other queue's receive returned %v, %v", r.msgs, r.err)
	default:
	}
	cancelOther()
	if r := <-other; r.err == nil || len(r.msgs) != 0 {
		t.Fatalf("the other queue's receive, cancelled: %v, %v", r.msgs, r.err)
	}
	if n := p.Riders(); n != 0 {
		t.Fatalf("%d riders left after every receive returned", n)
	}
}

// TestABusyPartitionTakesNoRiders: a partition that proposed an entry a
// moment ago lets a waiting receive propose its own lock once the send
// applied, so that under load receives take what several entries brought.
func TestABusyPartitionTakesNoRiders(t *testing.T) {
	p := openAlone(t, func(c *partition.Config) { partition.QuietForRiders(c, time.Hour) })
	configure(t, p, nil)
	ctx := context.Background()
	type received struct {
		msgs []*raftbusv1.ReceivedMessage
		err  error
	}
	got := make(chan received, 1)
	go func() {
		msgs, err := p.Receive(ctx, lockCmd(5), 30*time.Second)
		got <- received{msgs, err}
	}()
	await.Until(t, 10*time.Second, "the receive to wait", func() bool { return p.Riders() == 1 })
	base := p.Info().CommitIndex
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: "m", Body: []byte("x")})); err != nil {
		t.Fatalf("send: %v", err)
	}
	if r := <-got; r.err != nil || len(r.msgs) != 1 {
		t.Fatalf("receive: %v, %v", r.msgs, r.err)
	}
	if n := p.Info().CommitIndex - base; n != 2 {
		t.Fatalf("the send and the receive took %d entries, want 2 (the send's, then the lock's)", n)
	}
	if n := p.Riders(); n != 0 {
		t.Fatalf("%d riders left after the receive returned", n)
	}
}
