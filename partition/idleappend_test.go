package partition_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// emptyAppends counts the pipelined AppendEntries without entries that a
// replica sends.
type emptyAppends struct {
	*raft.InmemTransport
	n *atomic.Int64
}

func (t emptyAppends) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.InmemTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return emptyAppendsPipeline{p, t.n}, nil
}

type emptyAppendsPipeline struct {
	raft.AppendPipeline
	n *atomic.Int64
}

func (p emptyAppendsPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if len(args.Entries) == 0 {
		p.n.Add(1)
	}
	return p.AppendPipeline.AppendEntries(args, resp)
}

// An idle leader stops repeating itself to its followers, yet they learn
// every commit and get every new entry at once: a held AppendEntries goes
// when the leader's own copy becomes durable (the commit index it may
// tell passes what it told) and when the leader stores new entries. The
// hold is an hour here, so that only those events can end it.
func TestAnIdleLeaderHoldsBackAppendsThatTellNothingNew(t *testing.T) {
	var empty atomic.Int64
	var mu sync.Mutex
	held := map[uint64]int{} // held requests by the last entry their follower was sent
	heldAfter := func(index uint64) int {
		mu.Lock()
		defer mu.Unlock()
		return held[index]
	}
	c, gates := syncGatedCluster(t, func(cfg *partition.Config) {
		cfg.IdleAppendHold = time.Hour
		partition.OnIdleHold(cfg, func(req *raft.AppendEntriesRequest) {
			mu.Lock()
			held[req.PrevLogEntry]++
			mu.Unlock()
		})
		cfg.Transport = emptyAppends{cfg.Transport.(*raft.InmemTransport), &empty}
		// Slow elections keep one leader through the idle window.
		cfg.HeartbeatTimeout = time.Second
		cfg.ElectionTimeout = time.Second
		cfg.LeaderLeaseTimeout = 500 * time.Millisecond
	})
	l := c.leader()
	p := c.replicas[l]
	configure(t, p, nil)
	c.converged()

	// Without the hold raft sends each follower one every 50-100 ms
	// (CommitTimeout): about 25 in a second to the two of them.
	before := empty.Load()
	time.Sleep(time.Second) // the window in which nothing should be sent
	if n := empty.Load() - before; n > 3 {
		t.Fatalf("an idle leader sent %d AppendEntries without entries in a second", n)
	}

	// An entry the followers hold before the leader's copy is durable:
	// they learn it is committed only once it is, with nothing else to
	// send them.
	gates[l].Hold()
	t.Cleanup(gates[l].Release)
	sent := make(chan error, 1)
	go func() {
		_, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{MessageId: "m1", Body: []byte("one")}))
		sent <- err
	}()
	<-gates[l].Waiting()
	entry := p.Raft().LastIndex()
	await.Until(t, 10*time.Second, "the entry to commit on the followers' copies", func() bool { return p.Raft().CommitIndex() >= entry })
	await.Until(t, 10*time.Second, "raft's next AppendEntries to both followers to be held", func() bool { return heldAfter(entry) >= 2 })
	gates[l].Release()
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	c.converged()

	// Raft's replication to both followers is held again; a new entry
	// must still reach them, or it cannot commit.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: "m2", Body: []byte("two")})); err != nil {
		t.Fatalf("send while the followers' AppendEntries are held: %v", err)
	}
	c.converged() // the followers hold what the leader holds
	if msgs := peekAll(t, p); len(msgs) != 2 {
		t.Fatalf("the queue holds %d messages, want 2", len(msgs))
	}
}
