package procs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// disk is a file system of a node's own: an ext4 image mounted through a
// loop device, so that the disk under one node can fail alone.
type disk struct {
	image, dir string
	dev        string // the loop device while mounted
}

// diskSize is the size of a node's disk image, which stays sparse: room
// for the node log's 64 MB segments, snapshots and the metadata.
const diskSize = 2 << 30

// DisksSupported says why nodes cannot have disks of their own here, or
// nil: it takes root, mkfs.ext4 and loop devices.
func DisksSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("mounting a disk image takes root")
	}
	for _, tool := range []string{"mkfs.ext4", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("disks of their own take %s: %w", tool, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("disks of their own take loop devices: %w", err)
	}
	return nil
}

// newDisk makes and mounts the disk named name under parent.
func newDisk(parent, name string) (*disk, error) {
	d := &disk{image: filepath.Join(parent, name+".img"), dir: filepath.Join(parent, name)}
	if err := os.MkdirAll(d.dir, 0o750); err != nil {
		return nil, err
	}
	f, err := os.Create(d.image)
	if err == nil {
		err = f.Truncate(diskSize)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		// Without lazy initialisation: ext4 would otherwise zero its inode
		// tables from a kernel thread after mounting, which keeps the file
		// system alive after it is unmounted.
		err = command("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", d.image)
	}
	if err == nil {
		err = d.mount()
	}
	return d, err
}

// mount mounts the image through a loop device of its own. Not mount -o
// loop, which takes the device the image is already on if any: a node
// started in a network namespace meanwhile (ip netns exec) has a copy of
// the mount table, which keeps a failed file system, and the device under
// it, alive after it is unmounted here, and mounting the image again on
// that device would find the failed file system.
func (d *disk) mount() error {
	out, err := exec.Command("losetup", "--find", "--show", d.image).Output()
	if err != nil {
		return fmt.Errorf("losetup %s: %w", d.image, err)
	}
	d.dev = strings.TrimSpace(string(out))
	if err := command("mount", d.dev, d.dir); err != nil {
		d.detach()
		return err
	}
	return nil
}

func (d *disk) unmount() error {
	if err := command("umount", d.dir); err != nil {
		return err
	}
	d.detach()
	return nil
}

// detach lets go of the loop device; one still in use elsewhere goes when
// the last user does.
func (d *disk) detach() {
	exec.Command("losetup", "--detach", d.dev).Run()
	d.dev = ""
}

// fail shuts the file system down as ext4 does when its disk errs: every
// read, write and sync on it fails from then on (EXT4_IOC_SHUTDOWN,
// without flushing the journal).
func (d *disk) fail() error {
	const (
		ext4IOCShutdown     = 0x8004587d // _IOR('X', 125, __u32)
		ext4GoingNoLogFlush = 2
	)
	f, err := os.Open(d.dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), ext4IOCShutdown, ext4GoingNoLogFlush); err != nil {
		return fmt.Errorf("shut down the file system on %s: %w", d.dir, err)
	}
	return nil
}

func command(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}

// HasDisks reports whether the nodes run on disks of their own
// (Options.Disks).
func (c *Cluster) HasDisks() bool { return len(c.Nodes) > 0 && c.Nodes[0].disk != nil }

// FailDisk fails the disk under node i: every read, write and sync on it
// fails from then on, and the node must notice at its next write.
func (c *Cluster) FailDisk(i int) error {
	d := c.Nodes[i].disk
	if d == nil {
		return fmt.Errorf("%s has no disk of its own", c.Nodes[i].ID)
	}
	return d.fail()
}

// RepairDisk puts node i's disk back, once its process has exited: the
// file system is mounted again, with what was synced before it failed
// (ext4 replays its journal).
func (c *Cluster) RepairDisk(i int) error {
	n := c.Nodes[i]
	if n.cmd != nil {
		return fmt.Errorf("repair the disk of %s: it still runs as pid %d", n.ID, n.PID())
	}
	if n.disk == nil {
		return fmt.Errorf("%s has no disk of its own", n.ID)
	}
	if err := n.disk.unmount(); err != nil {
		return err
	}
	return n.disk.mount()
}

// unmountDisks unmounts the nodes' disks, whose processes are gone; their
// images stay in Dir.
func (c *Cluster) unmountDisks() {
	for _, n := range c.Nodes {
		if n.disk != nil {
			if err := n.disk.unmount(); err != nil {
				c.t.Logf("unmount the disk of %s: %v", n.ID, err)
			}
		}
	}
}
