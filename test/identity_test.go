package test

import (
	"context"
	"fmt"
	"os"
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

// TestWipedNodeIsRefusedAndItsOldVotesElectNoStaleLeader is the danger
// of a wiped voter: n1 and n3 commit messages while n2 is paused; then n1
// and n3 die, n3's data dir is wiped and n3 comes back under its id with
// the peer list that formed the cluster. With a blank log it would vote
// for n2, which lacks the acknowledged messages. It is refused instead,
// and says what to do; n2 alone elects nobody, and once n1 is back (a
// normal restart, let in) every acknowledged message is there.
func TestWipedNodeIsRefusedAndItsOldVotesElectNoStaleLeader(t *testing.T) {
	c := procs.Start(t, raftbusd, 3)
	known := waitIncarnations(t, c, 1)
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{
			Name: "orders", RequiresDuplicateDetection: proto.Bool(true)}})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	})
	msg := []raftbusv1.MessagingServiceClient{
		raftbusv1.NewMessagingServiceClient(c.Conn(0)),
		raftbusv1.NewMessagingServiceClient(c.Conn(1)),
	}
	send := func(via int, id string) {
		t.Helper()
		call(t, 30*time.Second, func(ctx context.Context) error {
			_, err := msg[via].Send(ctx, &raftbusv1.SendRequest{EntityPath: "orders", Messages: []*raftbusv1.Message{{MessageId: id, Body: []byte(id)}}})
			return err
		})
	}
	send(0, "with-all-three")

	c.Pause(1)
	acked := []string{"with-all-three"}
	for i := range 20 {
		id := fmt.Sprintf("while-n2-paused-%d", i)
		send(0, id)
		acked = append(acked, id)
	}
	c.Kill(0)
	c.Kill(2)
	if err := os.RemoveAll(c.Nodes[2].DataDir); err != nil {
		t.Fatal(err)
	}
	c.Resume(1)
	c.Restart(2)
	if !c.WaitExit(2, 30*time.Second) {
		t.Fatal("the wiped n3 is still running 30s after it started")
	}
	if l := logOf(t, c.Nodes[2]); !strings.Contains(l, refusal) || !strings.Contains(l, known["n3"]) {
		t.Fatalf("the wiped n3 did not say it is refused and what to do:\n%s", l)
	}
	if l := logOf(t, c.Nodes[1]); !strings.Contains(l, "refused node n3") {
		t.Fatalf("n2's log does not say it refused n3:\n%s", l)
	}

	// n2 alone must not lead the queue's partition (nor the metadata
	// group): its log lacks what n1 and n3 acknowledged.
	admin2 := raftbusv1.NewAdminServiceClient(c.Conn(1))
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := admin2.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		cancel()
		if err == nil {
			for _, p := range info.GetPartitions() {
				if p.GetLeaderNodeId() == "n2" {
					t.Fatalf("n2 leads %s/%d without the messages it missed", p.GetEntityPath(), p.GetPartitionId())
				}
			}
			for _, n := range info.GetNodes() {
				if n.GetNodeId() == "n2" && n.GetMetadataLeader() {
					t.Fatal("n2 leads the metadata group without the entries it missed")
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}

	// n1 is back: n1 and n2 serve, with every acknowledged message. (Not
	// WaitReady: with n3 down, cluster info takes its status timeout.)
	c.Restart(0)
	got := make(map[string]bool)
	deadline = time.Now().Add(60 * time.Second)
	for len(got) < len(acked) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := msg[1].Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: 100,
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

	// n1 came back on its own data dir: a normal restart is let in.
	send(0, "via-restarted-n1")
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
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "q"}})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	})
	call(t, 30*time.Second, func(ctx context.Context) error {
		_, err := msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "q", Messages: []*raftbusv1.Message{{MessageId: "x", Body: []byte("x")}}})
		return err
	})
}
