//go:build linux

package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftbus/raftbus/test/procs"
)

// loopDisk is a file system of its own, an ext4 image mounted through a
// loop device, for one node's data dir: a disk that can fail alone.
type loopDisk struct {
	image, dir string
}

// newLoopDisk makes and mounts a disk under parent. It skips the test
// where the machine cannot: it takes root, mkfs.ext4 and loop devices.
func newLoopDisk(t *testing.T, parent string) *loopDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a disk of its own for a node takes root (mount)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("a disk of its own for a node takes %s: %v", tool, err)
		}
	}
	d := &loopDisk{image: filepath.Join(parent, "disk.img"), dir: filepath.Join(parent, "disk")}
	if err := os.MkdirAll(d.dir, 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(d.image)
	if err == nil {
		err = f.Truncate(1 << 30) // sparse: the node log preallocates 64 MB segments
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.ext4", "-q", "-F", d.image)
	if out, err := exec.Command("mount", "-o", "loop", d.image, d.dir).CombinedOutput(); err != nil {
		t.Skipf("this machine cannot mount a loop device: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", d.dir).Run() })
	return d
}

// fail shuts the file system down as ext4 does when its disk fails:
// every read, write and sync on it fails from then on (EXT4_IOC_SHUTDOWN,
// without flushing its journal).
func (d *loopDisk) fail(t *testing.T) {
	t.Helper()
	const (
		ext4IOCShutdown     = 0x8004587d // _IOR('X', 125, __u32)
		ext4GoingNoLogFlush = 2
	)
	f, err := os.Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), ext4IOCShutdown, ext4GoingNoLogFlush); err != nil {
		t.Fatalf("shut down the file system on %s: %v", d.dir, err)
	}
}

// replace mounts the image again once nothing uses the failed file system,
// as a disk put back after repair: what was synced before the failure is
// there, ext4 having replayed its journal.
func (d *loopDisk) replace(t *testing.T) {
	t.Helper()
	run(t, "umount", d.dir)
	run(t, "mount", "-o", "loop", d.image, d.dir)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

// TestANodeWhoseDiskFailsStopsAndComesBack runs one node of three on a
// disk of its own and fails that disk under load, as ext4 fails a file
// system whose disk errs. The node must stop by itself and say why, the
// other two must go on serving, and once the disk is back the node must
// start on what it had synced, catch up and lead again, and no
// acknowledged message may be lost or come back wrong.
func TestANodeWhoseDiskFailsStopsAndComesBack(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	w := newCorruptionWorkload(t, c)
	victim := w.preferredLeader(0)
	for i := range 60 {
		w.send(fmt.Sprintf("a%03d", i), uint32(i%3))
	}

	// Move the node onto a disk of its own.
	disk := newLoopDisk(t, c.Dir)
	if err := c.Terminate(victim, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(disk.dir, c.Nodes[victim].ID)
	run(t, "cp", "-a", c.Nodes[victim].DataDir, moved)
	// cp syncs nothing; the node's files must be on the disk before it
	// fails, as they were where they came from.
	unix.Sync()
	c.Nodes[victim].DataDir = moved
	c.Restart(victim)
	t.Cleanup(func() { c.Kill(victim) }) // before the disk is unmounted
	c.WaitReady(victim, 60*time.Second)
	w.awaitRebuilt(victim)

	disk.fail(t)
	failed := time.Now()
	// The node notices at its next write: every partition has a replica on
	// it, so every send makes one.
	for i := 0; !c.WaitExit(victim, 10*time.Millisecond); i++ {
		if time.Since(failed) > 30*time.Second {
			t.Fatalf("%s still runs %v after its disk failed", c.Nodes[victim].ID, time.Since(failed).Round(time.Second))
		}
		w.send(fmt.Sprintf("b%03d", i), uint32(i%3))
	}
	t.Logf("%s stopped %v after its disk failed", c.Nodes[victim].ID, time.Since(failed).Round(time.Millisecond))
	awaitLog(t, c.Nodes[victim].LogPath, "no replica on this node can store anything more", 5*time.Second)

	// The other two serve every partition.
	for i := range 60 {
		w.send(fmt.Sprintf("c%03d", i), uint32(i%3))
	}

	disk.replace(t)
	c.Restart(victim)
	c.WaitReady(victim, 60*time.Second)
	for i := range 30 {
		w.send(fmt.Sprintf("d%03d", i), uint32(i%3))
	}
	w.awaitRebuilt(victim)
	w.drain(victim)
	w.check()
}
