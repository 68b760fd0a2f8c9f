package partition_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
	"github.com/raftbus/raftbus/raftlog/powercut"
)

// TestPowerCutsLoseNothingAcknowledged runs three replicas whose node logs
// sit on disks that lose power, while senders stream messages and a
// receiver completes them: in turn every node at once (keeping nothing
// they had not synced), the leader alone, and the leader with a follower
// (keeping about half of it, as whole sectors, or nothing) lose power and
// start again from what their disks kept. Every send acknowledged before
// a cut must be there afterwards, under its sequence number and with its
// bytes, unless its completion may have taken effect; no message whose
// completion was acknowledged may be delivered again; the numbers must be
// gap-free, the node logs must not take a cut for damage, and the
// replicas must converge. A kill of a process leaves its writes in the
// page cache, so only a power cut tests what a leader that writes while
// it replicates rests on: its answers wait for its own sync, and its
// followers learn of a commit only up to what it has synced.
func TestPowerCutsLoseNothingAcknowledged(t *testing.T) {
	const seed = 20261128
	disks := []*powercut.Disk{powercut.NewDisk(seed), powercut.NewDisk(seed + 1), powercut.NewDisk(seed + 2)}
	for _, d := range disks {
		// Syncs that take time, so that a leader's entries are often on
		// their way to its disk while its followers hold them.
		d.SetSyncTime(5 * time.Millisecond)
	}
	c := newTestClusterOn(t, 3, nil, func(i int) raftlog.FS { return disks[i].FS() })
	configure(t, c.replicas[c.leader()], nil)

	// epoch counts the cuts; a send or a completion counts as
	// acknowledged only when its answer came in the epoch it was made in,
	// before the next cut.
	var (
		mu     sync.RWMutex // held for writing while nodes lose power
		epoch  int
		h      = &history{acked: map[string]int64{}, completed: map[string]int64{}, maybeCompleted: map[string]int64{}}
		ackedN = make(chan struct{}, 1<<16)
	)
	inEpoch := func() int {
		mu.RLock()
		defer mu.RUnlock()
		return epoch
	}
	current := func() *partition.Partition {
		mu.RLock()
		defer mu.RUnlock()
		for _, p := range c.replicas {
			if p != nil && p.IsLeader() {
				return p
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; {
				id := fmt.Sprintf("s%d-%d", s, i)
				p := current()
				if p == nil {
					time.Sleep(5 * time.Millisecond) // no leader yet
					continue
				}
				sentIn := inEpoch()
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := p.Apply(actx, sendCmd(&raftbusv1.Message{MessageId: id, Body: []byte(id)}))
				acancel()
				switch partition.ReasonOf(err) {
				case raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED:
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("send %s: %v", id, err)
						}
						return
					}
					mu.RLock()
					if epoch == sentIn {
						h.mu.Lock()
						h.acked[id] = res.GetSend().Messages[0].SequenceNumber
						h.mu.Unlock()
						ackedN <- struct{}{}
					}
					mu.RUnlock()
				case raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
					// May or may not be in the log; not counted as acked.
				default:
					time.Sleep(5 * time.Millisecond) // NOT_LEADER, busy: retry
					continue
				}
				i++
			}
		}()
	}
	// A receiver completes messages through whichever replica leads.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			p := current()
			if p == nil {
				time.Sleep(5 * time.Millisecond) // no leader yet
				continue
			}
			msgs, err := p.Receive(ctx, lockCmd(8), 20*time.Millisecond)
			if err != nil {
				continue
			}
			for _, m := range msgs {
				id := m.Message.MessageId
				sentIn := inEpoch()
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := p.Apply(actx, completeCmd(m.LockToken))
				acancel()
				mu.RLock()
				h.mu.Lock()
				if _, done := h.completed[id]; done {
					t.Errorf("message %s (seq %d) delivered again after its completion was acknowledged", id, m.SequenceNumber)
				}
				switch {
				case err == nil && epoch == sentIn:
					h.completed[id] = m.SequenceNumber
				case err == nil, partition.ReasonOf(err) == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
					h.maybeCompleted[id] = m.SequenceNumber
				}
				h.mu.Unlock()
				mu.RUnlock()
			}
		}
	}()

	// cut takes the power of the nodes in victims at once: each is cut off
	// from its peers first, so that it says nothing after its disk lost
	// what it had not synced, and then shut down on the world it wrote to.
	cut := func(victims []int, keep float64) {
		mu.Lock()
		defer mu.Unlock()
		epoch++
		for _, i := range victims {
			c.trans[i].DisconnectAll()
			for j, other := range c.trans {
				if j != i && other != nil {
					other.Disconnect(c.trans[i].LocalAddr())
				}
			}
		}
		// The leader's disk first: its sync under way is what an
		// acknowledgement must not rest on alone.
		for _, i := range victims {
			disks[i].Cut(keep)
		}
		for _, i := range victims {
			c.replicas[i].Close()
			c.replicas[i] = nil
			c.trans[i] = nil
			c.logs[i].Close()
			c.logs[i] = nil
		}
		for _, i := range victims {
			c.start(i)
			if rec := c.logs[i].Recovery(); len(rec.Damaged) > 0 || rec.Unattributed {
				t.Fatalf("node %d took a power cut for damage: %+v", i, rec)
			}
		}
	}
	waitAcks := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-ackedN:
			case <-time.After(30 * time.Second):
				t.Fatal("no send acknowledged for 30 s")
			}
		}
	}
	const rounds = 15
	for round := range rounds {
		waitAcks(60)
		l := c.leader()
		// Whole-cluster cuts keep nothing unsynced: what an acknowledgement
		// rests on must have been synced somewhere a new leader will come
		// from.
		victims, keep := []int{l, (l + 1) % 3, (l + 2) % 3}, 0.0
		switch round % 3 {
		case 1:
			victims, keep = []int{l}, 0.5
		case 2:
			victims, keep = []int{l, (l + 1) % 3}, float64(round%2)/2
		}
		cut(victims, keep)
	}
	waitAcks(60)
	cancel()
	wg.Wait()
	if t.Failed() {
		return
	}

	c.converged()
	held := h.verify(t, peekAll(t, c.replicas[c.leader()]))
	t.Logf("across %d power cuts: %d sends and %d completions acknowledged, %d held", rounds, len(h.acked), len(h.completed), held)
}
