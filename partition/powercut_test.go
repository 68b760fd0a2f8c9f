package partition_test

import (
	"context"
	"testing"
	"time"

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
	load := newClientLoad(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load.startSenders(ctx, 4, 0)
	load.startReceiver(ctx, 0)

	// cut takes the power of the nodes in victims at once: each is cut off
	// from its peers first, so that it says nothing after its disk lost
	// what it had not synced, and then shut down on the world it wrote to.
	// Answers to calls made before the cut no longer count.
	cut := func(victims []int, keep float64) {
		load.disrupt(func() {
			load.epoch++
			for _, i := range victims {
				c.isolate(i)
			}
			// The leader's disk first: its sync under way is what an
			// acknowledgement must not rest on alone.
			for _, i := range victims {
				disks[i].Cut(keep)
			}
			for _, i := range victims {
				c.shutDown(i)
			}
			for _, i := range victims {
				c.start(i)
				if rec := c.logs[i].Recovery(); len(rec.Damaged) > 0 || rec.Unattributed {
					t.Fatalf("node %d took a power cut for damage: %+v", i, rec)
				}
			}
		})
	}
	const rounds = 15
	for round := range rounds {
		load.waitAcks(60)
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
	load.waitAcks(60)
	cancel()
	load.wg.Wait()
	if t.Failed() {
		return
	}

	c.converged()
	h := load.h
	held := h.verify(t, peekAll(t, c.replicas[c.leader()]))
	t.Logf("across %d power cuts: %d sends and %d completions acknowledged, %d held", rounds, len(h.acked), len(h.completed), held)
}
