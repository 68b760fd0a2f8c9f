package partition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
	"github.com/raftbus/raftbus/raftlog/raftlogtest"
)

// syncGatedCluster is a test cluster whose node logs are on disks whose
// syncs can be held or failed.
func syncGatedCluster(t *testing.T, tune func(*partition.Config)) (*testCluster, []*raftlogtest.Disk) {
	gates := []*raftlogtest.Disk{{}, {}, {}}
	c := newTestClusterOn(t, 3, tune, func(i int) raftlog.FS { return gates[i] })
	return c, gates
}

// The leader writes an entry while it replicates it: the entry commits
// while the leader's own sync is held, but the leader answers nobody and
// tells no follower it is committed until that sync completes.
//
// The replicas run with the production timings: the leader must stay the
// leader while its sync is held.
func TestLeaderWritesWhileReplicatingAndActsOnlyOnItsDurableCopy(t *testing.T) {
	c, gates := syncGatedCluster(t, productionTimings)
	l := c.leader()
	p := c.replicas[l]
	configure(t, p, nil)

	gates[l].Hold()
	t.Cleanup(gates[l].Release) // before the cluster closes, should the test fail
	sent := make(chan error, 1)
	go func() {
		_, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{MessageId: "m", Body: []byte("body")}))
		sent <- err
	}()
	<-gates[l].Waiting() // the leader's log is syncing the send's entry
	entry := p.Raft().LastIndex()
	await.Until(t, 10*time.Second, "the entry to commit on a follower's copy", func() bool { return p.Raft().CommitIndex() >= entry })

	// One more entry, sent to the followers with the commit index raft
	// holds now (past the send's entry): an undecodable one, which every
	// replica skips.
	next := p.Raft().Apply([]byte("not an entry"), 0)
	await.Until(t, 10*time.Second, "the next entry to commit", func() bool { return p.Raft().CommitIndex() > entry })
	for i, r := range c.replicas {
		if i != l && r.Raft().CommitIndex() >= entry {
			t.Fatalf("follower %d learned that entry %d is committed while the leader's copy is not durable", i, entry)
		}
	}
	select {
	case err := <-sent:
		t.Fatalf("the send was answered (%v) while the leader's copy was not durable", err)
	default:
	}
	if got := p.StateAppliedIndex(); got >= entry {
		t.Fatalf("the leader applied through %d while its copy of entry %d is not durable", got, entry)
	}

	gates[l].Release()
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := next.Error(); err != nil {
		t.Fatalf("the undecodable entry: %v", err)
	}
	c.converged()
	if msgs := peekAll(t, p); len(msgs) != 1 || string(msgs[0].Message.Body) != "body" {
		t.Fatalf("queue holds %v, want the one message", msgs)
	}
}

// A leader whose own copy cannot be made durable answers OUTCOME_UNKNOWN,
// applies nothing more, takes no snapshot and steps down; the entry lives
// on in the followers, and the next leader serves it once.
func TestLeaderWhoseLogFailsAnswersOutcomeUnknownAndStepsDown(t *testing.T) {
	// A replica whose log failed stops taking part at its next term
	// (TestAReplicaThatCannotStoreATermStopsWithoutAPanic). Slow timeouts
	// keep it in play until the test has seen what it does before that.
	c, gates := syncGatedCluster(t, func(cfg *partition.Config) {
		cfg.HeartbeatTimeout = 2 * time.Second
		cfg.ElectionTimeout = 2 * time.Second
		cfg.LeaderLeaseTimeout = time.Second
	})
	l := c.leader()
	p := c.replicas[l]
	configure(t, p, nil)

	gates[l].Fail(errors.New("disk gone"))
	_, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{MessageId: "m", Body: []byte("body")}))
	if got := partition.ReasonOf(err); got != raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN {
		t.Fatalf("send on a leader whose log failed: %v (%s), want OUTCOME_UNKNOWN", err, got)
	}
	if err := p.Raft().Snapshot().Error(); err == nil {
		t.Fatal("the replica whose log failed took a snapshot")
	}
	await.Until(t, 10*time.Second, "the replica whose log failed to step down", func() bool { return !p.IsLeader() })
	c.kill(l)

	next := c.leader()
	if msgs := peekAll(t, c.replicas[next]); len(msgs) != 1 || string(msgs[0].Message.Body) != "body" {
		t.Fatalf("the next leader's queue holds %v, want the one message", msgs)
	}
}
