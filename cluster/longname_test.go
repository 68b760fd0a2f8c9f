package cluster

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The longest valid entity names, '/' included, make replica directory
// names past what file systems allow; such a queue works like any other,
// across a restart too, and status keeps answering.
func TestAQueueWithTheLongestNameWorks(t *testing.T) {
	segment := strings.Repeat("a", 9) + "/"
	name := strings.Repeat(segment, 26) // 260 characters, 25 of them '/'
	name = name[:259] + "z"
	if len(name) != 260 || len(url.PathEscape(name)) < 300 {
		t.Fatalf("name of %d characters, %d escaped", len(name), len(url.PathEscape(name)))
	}
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: name, PartitionCount: proto.Uint32(2)})
	for i := range 10 {
		sendOne(t, c.client(i%3), name, fmt.Sprintf("m%d", i))
	}
	if got := drain(t, c.client(1), name, 10, 20*time.Second); len(got) != 10 {
		t.Fatalf("received %v", got)
	}
	retry(t, 10*time.Second, func(ctx context.Context) (*raftbusv1.GetClusterInfoResponse, error) {
		return c.client(2).admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
	})

	// The replicas reopen from their directories after a restart.
	addr := c.stop(2)
	c.start(2, addr)
	sendOne(t, c.client(2), name, "after-restart")
	if got := drain(t, c.client(2), name, 1, 20*time.Second); got["after-restart"] != 1 {
		t.Fatalf("after the restart received %v", got)
	}
	e := c.nodes[2].meta.fsm.Entity(name)
	for id := range uint32(2) {
		dir := c.nodes[2].replicaDir(groupName(e, id))
		if group, ok := groupOfDir(dir); !ok || group != groupName(e, id) {
			t.Errorf("directory %s names group %q, want %q", dir, group, groupName(e, id))
		}
	}
}

func TestReplicaDirectoryNames(t *testing.T) {
	short := "orders/x@3/1"
	if replicaDirName(short) != url.PathEscape(short) {
		t.Fatalf("a short name changed: %s", replicaDirName(short))
	}
	long1, long2 := strings.Repeat("a/", 129)+"b@1/0", strings.Repeat("a/", 129)+"c@1/0"
	d1, d2 := replicaDirName(long1), replicaDirName(long2)
	if len(d1) > maxDirName || d1 == d2 || replicaDirName(long1) != d1 {
		t.Fatalf("long names: %q (%d) and %q", d1, len(d1), d2)
	}
}
