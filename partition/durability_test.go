package partition_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestRestartFromDiskRestoresState(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.replicas[c.leader()]
	configure(t, p, nil)
	ctx := context.Background()
	for i := range 30 {
		if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: strconv.Itoa(i), Body: []byte("x")})); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	got, err := p.Receive(ctx, lockCmd(5), 0)
	if err != nil || len(got) != 5 {
		t.Fatalf("receive: %d, %v", len(got), err)
	}
	if _, err := p.Apply(ctx, completeCmd(got[0].LockToken)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	c.converged()
	before := p.Digest()

	c.closeAll()
	for i := range c.replicas {
		c.start(i)
	}
	p = c.replicas[c.leader()]
	c.converged()
	if p.Digest() != before {
		t.Fatal("state after restarting every replica differs from before")
	}
	// The locks survived the restart: settling with them still works.
	if _, err := p.Apply(ctx, completeCmd(got[1].LockToken)); err != nil {
		t.Fatalf("complete with a lock taken before the restart: %v", err)
	}
}

// The replicas run with the production timings, and every send goes to
// whichever replica leads: the test is about the follower, not about who
// leads.
func TestLaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *partition.Config) {
		cfg.SnapshotThreshold = 20
		cfg.TrailingLogs = 5
		productionTimings(cfg)
	})
	l := c.leader()
	configure(t, c.replicas[l], nil)
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			c.send(strconv.Itoa(i))
		}
	}
	// The follower falls behind with more entries of its own than
	// TrailingLogs: installing the snapshot must empty its log, or its
	// next appends would not follow what it kept.
	send(0, 10)
	c.converged()
	behind := (c.leader() + 1) % 3
	c.kill(behind)

	send(10, 110)
	// Both replicas that stayed compact their logs, so whichever leads
	// when the follower returns has only a snapshot to give it.
	for i, p := range c.replicas {
		if p != nil {
			if err := p.Raft().Snapshot().Error(); err != nil {
				t.Fatalf("snapshot of replica %d: %v", i, err)
			}
		}
	}
	c.start(behind)
	c.converged()
	stats := c.replicas[behind].Raft().Stats()
	if stats["last_snapshot_index"] == "0" {
		t.Fatalf("follower caught up without installing a snapshot (stats %v)", stats)
	}
	send(110, 120)
	c.converged()
}

// TestTimeDrivenWorkHappensWithoutTraffic checks that the leader proposes
// Ticks on its own: an expired lock releases its message and a scheduled
// message activates with no client command to trigger them, neither before
// its time.
//
// The times to check against are the broker's: a lock runs from the time
// the leader stamped on the receive (in whole milliseconds) to the
// LockedUntil it returns, not from when the receive returned, which under
// load can be tens of milliseconds later. The replicas run with the
// production timings: the test is about one leader's timers.
func TestTimeDrivenWorkHappensWithoutTraffic(t *testing.T) {
	c := newTestCluster(t, 3, productionTimings)
	p := c.replicas[c.leader()]
	const lockFor = 300 * time.Millisecond
	configure(t, p, &raftbusv1.QueueProperties{LockDuration: durationpb.New(lockFor)})
	ctx := context.Background()

	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: "locked", Body: []byte("x")})); err != nil {
		t.Fatalf("send: %v", err)
	}
	asked := time.UnixMilli(time.Now().UnixMilli())
	got, err := p.Receive(ctx, lockCmd(1), 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %d, %v", len(got), err)
	}
	until := got[0].GetLockedUntil().AsTime()
	if until.Before(asked.Add(lockFor)) {
		t.Fatalf("locked until %v, less than %v after the receive was asked for (%v)", until, lockFor, asked)
	}
	// The receive long-polls: it returns once the expired lock released
	// the message.
	again, err := p.Receive(ctx, lockCmd(1), 5*time.Second)
	if err != nil || len(again) != 1 || again[0].DeliveryCount != 2 {
		t.Fatalf("redelivery: %v, %v; want the message with delivery count 2", again, err)
	}
	if now := time.Now(); now.Before(until) {
		t.Fatalf("message delivered again at %v, before its lock expired at %v", now, until)
	}
	if _, err := p.Apply(ctx, completeCmd(again[0].LockToken)); err != nil {
		t.Fatalf("complete: %v", err)
	}

	// In whole milliseconds, the resolution of the broker's time.
	at := time.UnixMilli(time.Now().Add(300 * time.Millisecond).UnixMilli())
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{
		MessageId: "scheduled", Body: []byte("x"), ScheduledEnqueueTime: timestamppb.New(at),
	})); err != nil {
		t.Fatalf("schedule: %v", err)
	}
	activated, err := p.Receive(ctx, lockCmd(1), 5*time.Second)
	if err != nil || len(activated) != 1 || activated[0].Message.MessageId != "scheduled" {
		t.Fatalf("receive scheduled: %v, %v", activated, err)
	}
	if now := time.Now(); now.Before(at) {
		t.Fatalf("scheduled message delivered at %v, before its time %v", now, at)
	}
}
