package nemesis

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// DiskFail fails the disk under a node (the leader of a random partition
// half the time) as ext4 fails a file system whose disk errs
// (procs.Cluster.FailDisk): every read, write and sync fails, and what
// was not synced is lost. The node must stop by itself at its next write.
// Healing waits for that, mounts the disk again and restarts the node on
// what it had synced. It needs nodes on disks of their own
// (procs.Options.Disks).
const DiskFail Kind = "disk"

// DiskKinds are the faults that need nodes on disks of their own.
var DiskKinds = []Kind{DiskFail}

// DiskFailStop bounds how long, after the fault's hold and a metadata
// change (which every member writes), a node whose disk failed may still
// run: it notices at its next write.
const DiskFailStop = 20 * time.Second

func init() { injectors[DiskFail] = diskFail }

func diskFail(n *Nemesis) func() {
	c := n.Cluster
	if !c.HasDisks() {
		return nil
	}
	i := n.pick(n.Rand.IntN(2) == 0)
	if i < 0 {
		return nil
	}
	id := c.Nodes[i].ID
	n.record("disk-fail "+id, false, func() error { return n.harness(c.FailDisk(i)) })
	return func() {
		n.record("repair the disk of "+id+" and restart it", true, func() error {
			var err error
			if !c.WaitExit(i, 0) {
				// The node notices at its next write. A metadata change
				// makes one on every member, busy or idle.
				n.touchMetadata(i)
			}
			if !c.WaitExit(i, DiskFailStop) {
				c.Kill(i)
				err = fmt.Errorf("%s still ran %v after its disk failed; killed", id, DiskFailStop)
			}
			if rerr := c.RepairDisk(i); rerr != nil {
				n.harness(rerr)
				return err
			}
			c.Restart(i)
			return err
		})
	}
}

// probeQueue is the queue touchMetadata creates and deletes.
const probeQueue = "nemesis-disk-probe"

// touchMetadata creates and deletes a queue through a running node other
// than i, so that every member writes its metadata log. Failures are left
// to the caller's wait: the write may reach node i first and stop it.
func (n *Nemesis) touchMetadata(i int) {
	for _, via := range n.running() {
		if via == i {
			continue
		}
		n.admin(via, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
			_, err := a.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: probeQueue}})
			if status.Code(err) == codes.AlreadyExists {
				return nil
			}
			return err
		})
		n.admin(via, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
			_, err := a.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: probeQueue})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			return err
		})
		return
	}
}
