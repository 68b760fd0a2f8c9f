package test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// refusal is what a refused node must tell its operator.
const refusal = "join under a new id, or restore its data dir"

// waitIncarnations waits until node i reports an incarnation for every
// node, so that a wiped node can be told apart.
func waitIncarnations(t *testing.T, c *procs.Cluster, i int) map[string]string {
	t.Helper()
	admin := raftbusv1.NewAdminServiceClient(c.Conn(i))
	out := make(map[string]string)
	call(t, 30*time.Second, func(ctx context.Context) error {
		info, err := admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		for _, n := range info.GetNodes() {
			out[n.GetNodeId()] = n.GetIncarnation()
		}
		for _, n := range c.Nodes {
			if out[n.ID] == "" {
				return status.Errorf(codes.Unavailable, "no incarnation recorded for %s yet", n.ID)
			}
		}
		return nil
	})
	return out
}

func logOf(t *testing.T, n *procs.Node) string {
	t.Helper()
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leaders is who leads, as node i sees it: the metadata group and each
// partition of the cluster's entities (by node id).
func leaders(t *testing.T, c *procs.Cluster, i int) (meta string, partitions []string) {
	t.Helper()
	admin := raftbusv1.NewAdminServiceClient(c.Conn(i))
	call(t, 30*time.Second, func(ctx context.Context) error {
		info, err := admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		meta, partitions = "", nil
		for _, n := range info.GetNodes() {
			if n.GetMetadataLeader() {
				meta = n.GetNodeId()
			}
		}
		for _, p := range info.GetPartitions() {
			if p.GetLeaderNodeId() == "" {
				return status.Errorf(codes.Unavailable, "%s/%d has no leader yet", p.GetEntityPath(), p.GetPartitionId())
			}
			partitions = append(partitions, p.GetLeaderNodeId())
		}
		if meta == "" {
			return status.Error(codes.Unavailable, "the metadata group has no leader yet")
		}
		return nil
	})
	return meta, partitions
}

// TestWipedNodeIsRefusedAndItsOldVotesElectNoStaleLeader is the danger
// of a wiped voter: two nodes commit messages while the third, stale, is
// paused; then both die, one of them (wiped) has its data dir removed and
// comes back under its id with the peer list that formed the cluster.
// With a blank log it would vote for stale, which lacks the acknowledged
// messages. It is refused instead, and says what to do; stale alone
// elects nobody, and once the other node is back (a normal restart, let
// in) every acknowledged message is there.
//
// stale is a node that leads nothing when it is paused: a leader paused
// for less than an election timeout is not deposed, and believes it
// leads for up to a lease after it resumes, which is no election.
func TestWipedNodeIsRefusedAndItsOldVotesElectNoStaleLeader(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	known := waitIncarnations(t, c, 1)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{
		Name: "orders", RequiresDuplicateDetection: proto.Bool(true)})
	send := func(via int, id string) {
		t.Helper()
		msg := raftbusv1.NewMessagingServiceClient(c.Conn(via))
		call(t, 30*time.Second, func(ctx context.Context) error {
			_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "orders", Messages: []*raftbusv1.Message{{MessageId: id, Body: []byte(id)}}})
			return err
		})
	}
	send(0, "with-all-three")

	// Pause a node that leads nothing, seen before the pause and, by
	// another node, after it (a pause that catches a leader is undone).
	stale, kept, wiped := -1, -1, -1
	for attempt := 0; stale < 0; attempt++ {
		if attempt == 10 {
			t.Fatal("no node led nothing for ten tries")
		}
		meta, parts := leaders(t, c, 0)
		stale = slices.IndexFunc(c.Nodes, func(n *procs.Node) bool { return n.ID != meta && !slices.Contains(parts, n.ID) })
		if stale < 0 {
			continue
		}
		kept, wiped = (stale+1)%3, (stale+2)%3
		c.Pause(stale)
		if meta, parts = leaders(t, c, kept); meta == c.Nodes[stale].ID || slices.Contains(parts, c.Nodes[stale].ID) {
			c.Resume(stale)
			stale = -1
		}
	}
	staleID, wipedID := c.Nodes[stale].ID, c.Nodes[wiped].ID
	// A node logs each metadata leadership it takes (the leader did):
	// stale's log from here on must show none.
	const leads = "this node leads the metadata group"
	if !c.Logged(leads) {
		t.Fatalf("no node logged %q", leads)
	}
	staleLogFrom := len(logOf(t, c.Nodes[stale]))
	acked := []string{"with-all-three"}
	for i := range 20 {
		id := fmt.Sprintf("while-%s-paused-%d", staleID, i)
		send(kept, id)
		acked = append(acked, id)
	}
	c.Kill(kept)
	c.Kill(wiped)
	if err := os.RemoveAll(c.Nodes[wiped].DataDir); err != nil {
		t.Fatal(err)
	}
	c.Resume(stale)
	c.Restart(wiped)
	if !c.WaitExit(wiped, 30*time.Second) {
		t.Fatalf("the wiped %s is still running 30s after it started", wipedID)
	}
	if l := logOf(t, c.Nodes[wiped]); !strings.Contains(l, refusal) || !strings.Contains(l, known[wipedID]) {
		t.Fatalf("the wiped %s did not say it is refused and what to do:\n%s", wipedID, l)
	}
	if l := logOf(t, c.Nodes[stale]); !strings.Contains(l, "refused node "+wipedID) {
		t.Fatalf("%s's log does not say it refused %s:\n%s", staleID, wipedID, l)
	}

	// stale alone must not lead the queue's partition (nor the metadata
	// group): its log lacks what the others acknowledged. With two nodes
	// down, cluster info waits out their status calls: ask it for a few
	// answers, not within a few seconds.
	adminStale := raftbusv1.NewAdminServiceClient(c.Conn(stale))
	answers := 0
	for deadline := time.Now().Add(60 * time.Second); answers < 3 && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		info, err := adminStale.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		cancel()
		if err != nil {
			time.Sleep(200 * time.Millisecond) // a node still starting answers at once
			continue
		}
		answers++
		for _, p := range info.GetPartitions() {
			if p.GetLeaderNodeId() == staleID {
				t.Fatalf("%s leads %s/%d without the messages it missed", staleID, p.GetEntityPath(), p.GetPartitionId())
			}
		}
		for _, n := range info.GetNodes() {
			if n.GetNodeId() == staleID && n.GetMetadataLeader() {
				t.Fatalf("%s leads the metadata group without the entries it missed", staleID)
			}
		}
	}
	if answers < 3 {
		t.Fatalf("%s answered cluster info %d times in 60s", staleID, answers)
	}
	// Between two answers stale could have won an election and lost it
	// again: its log says whether it did.
	if l := logOf(t, c.Nodes[stale])[staleLogFrom:]; strings.Contains(l, leads) {
		t.Fatalf("%s took the metadata group's leadership without the entries it missed:\n%s", staleID, l)
	}

	// kept is back: it and stale serve, with every acknowledged message.
	// (Not WaitReady: with the wiped node down, cluster info takes its
	// status timeout.)
	c.Restart(kept)
	got := make(map[string]bool)
	receiver := raftbusv1.NewMessagingServiceClient(c.Conn(stale))
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(acked) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := receiver.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: 100,
			ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, MaxWait: durationpb.New(time.Second)})
		cancel()
		if err != nil {
			if !retryable(err) {
				t.Fatalf("receive: %v", err)
			}
			continue
		}
		for _, m := range resp.GetMessages() {
			got[m.GetMessage().GetMessageId()] = true
		}
	}
	for _, id := range acked {
		if !got[id] {
			t.Errorf("acknowledged message %s was lost", id)
		}
	}

	// kept came back on its own data dir: a normal restart is let in.
	send(kept, "via-restarted-"+c.Nodes[kept].ID)
}

// TestNodeOfAnotherClusterIsRefused: n3's data dir is replaced by that of
// a node n3 of another cluster; started with this cluster's peers, it is
// refused and says why, and the cluster serves on.
func TestNodeOfAnotherClusterIsRefused(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	other := procs.Start(t, raftbusd, 3)
	waitIncarnations(t, c, 0)
	waitIncarnations(t, other, 0)
	c.Kill(2)
	other.Kill(2)
	if err := os.RemoveAll(c.Nodes[2].DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other.Nodes[2].DataDir, c.Nodes[2].DataDir); err != nil {
		t.Fatal(err)
	}
	c.Restart(2)
	if !c.WaitExit(2, 30*time.Second) {
		t.Fatal("n3 of another cluster is still running 30s after it started")
	}
	if l := logOf(t, c.Nodes[2]); !strings.Contains(l, "belongs to cluster") {
		t.Fatalf("n3 did not say it belongs to another cluster:\n%s", l)
	}
	msg := raftbusv1.NewMessagingServiceClient(c.Conn(1))
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	createQueue(t, admin, 30*time.Second, &raftbusv1.QueueProperties{Name: "q"})
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "q", Messages: []*raftbusv1.Message{{MessageId: "x", Body: []byte("x")}}})
		return err
	})
}
