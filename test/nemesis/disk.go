package nemesis

import (
	"fmt"
	"time"
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

// DiskFailStop bounds how long, after the fault's hold, a node whose disk
// failed may still run. It notices at its next write, and a workload
// writes to the partitions of every node many times a second.
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
