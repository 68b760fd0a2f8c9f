package cluster

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
)

// failingDisk is the operating system's file system whose writes and
// syncs can be made to fail, as a disk that fills up or breaks.
type failingDisk struct {
	raftlog.OSFS
	mu  sync.Mutex
	err error
}

func (d *failingDisk) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *failingDisk) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *failingDisk) Create(name string) (raftlog.File, error) {
	f, err := d.OSFS.Create(name)
	return failingFile{f, d}, err
}

func (d *failingDisk) OpenRW(name string) (raftlog.File, error) {
	f, err := d.OSFS.OpenRW(name)
	return failingFile{f, d}, err
}

type failingFile struct {
	raftlog.File
	d *failingDisk
}

func (f failingFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.failure(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f failingFile) Sync() error {
	if err := f.d.failure(); err != nil {
		return err
	}
	return f.File.Sync()
}

// TestANodeWhoseDiskFailsAWriteStops: when a node's log fails a write,
// the node stops on its own and says what to do, rather than staying up
// with every replica on it stuck; the other nodes go on serving.
func TestANodeWhoseDiskFailsAWriteStops(t *testing.T) {
	disk := &failingDisk{}
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		if cfg.NodeID == "n3" {
			cfg.nodeLogFS = disk
		}
	})
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders"})
	sendOne(t, c.client(0), "orders", "before")

	disk.fail(syscall.EIO)
	// n3 holds a replica of the queue's partition: the send reaches its log.
	sendOne(t, c.client(0), "orders", "during")
	select {
	case err := <-c.nodes[2].Failed():
		for _, want := range []string{syscall.EIO.Error(), "Check the disk under " + c.nodes[2].nodeLogDir()} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("the node stopped with %q, want it to say %q", err, want)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the node whose disk fails is still running 20s later")
	}
	sendOne(t, c.client(1), "orders", "after")
	if got := drain(t, c.client(0), "orders", 3, 20*time.Second); len(got) != 3 {
		t.Fatalf("received %v, want before, during and after", got)
	}
}
