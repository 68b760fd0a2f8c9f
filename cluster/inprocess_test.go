package cluster

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestInProcessServesLikeTheNetwork: the node's in-process connection
// serves the public services as its gRPC server does: a call it cannot
// serve itself is forwarded to the partition leader on another node,
// errors are statuses carrying ErrorInfo, and the caller's metadata
// arrives (a call that must not be forwarded, to a partition another node
// leads, is answered NOT_LEADER).
func TestInProcessServesLikeTheNetwork(t *testing.T) {
	c := newTestCluster(t, 3)
	n := c.nodes[0]
	local := clients{admin: raftbusv1.NewAdminServiceClient(n.InProcess()), msg: raftbusv1.NewMessagingServiceClient(n.InProcess())}
	createQueue(t, local, &raftbusv1.QueueProperties{Name: "inproc", PartitionCount: proto.Uint32(6)})
	for i := range 30 {
		sendOne(t, local, "inproc", fmt.Sprint(i))
	}
	if got := drain(t, local, "inproc", 30, 30*time.Second); len(got) != 30 {
		t.Fatalf("received %d distinct messages, want 30", len(got))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := local.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "nowhere", Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
	if info := errorInfo(t, err); info.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("send to an unknown queue: %v, want NOT_FOUND", err)
	}

	// A partition led elsewhere (the six cannot all be led by n1 once
	// leadership has spread; wait for one that is not).
	var other uint32
	await.Until(t, 30*time.Second, "a partition led by another node", func() bool {
		rt, err := local.admin.GetRoutingTable(ctx, &raftbusv1.GetRoutingTableRequest{EntityPath: "inproc"})
		if err != nil {
			return false
		}
		for _, p := range rt.GetEntities()[0].GetPartitions() {
			if p.GetLeaderAddress() != "" && p.GetLeaderAddress() != n.Addr() {
				other = p.GetPartitionId()
				return true
			}
		}
		return false
	})
	never := metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
	_, err = local.msg.Send(never, &raftbusv1.SendRequest{EntityPath: "inproc", PartitionId: proto.Uint32(other), Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
	if info := errorInfo(t, err); info.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER {
		t.Fatalf("never-forward send to partition %d, led elsewhere: %v, want NOT_LEADER", other, err)
	}
}

// TestClientReachesInProcessNodesWithoutDialling: a client given a node's
// in-process connection never dials that node's address, and works.
func TestClientReachesInProcessNodesWithoutDialling(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.nodes[0]
	var dialled atomic.Int32
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		dialled.Add(1)
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	cl, err := client.New([]string{n.Addr()}, &client.ClientOptions{
		InProcess:   map[string]grpc.ClientConnInterface{n.Addr(): n.InProcess()},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dialer)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.NewFromClient(cl).CreateQueue(ctx, "local", nil); err != nil {
		t.Fatal(err)
	}
	s, _ := cl.NewSender("local", nil)
	if err := s.SendMessage(ctx, &client.Message{Body: []byte("in process")}, nil); err != nil {
		t.Fatal(err)
	}
	r, _ := cl.NewReceiverForQueue("local", nil)
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "in process" {
		t.Fatalf("receive: %v, %v", msgs, err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &client.Message{Body: make([]byte, 2<<20)}, nil); err == nil {
		t.Fatal("a message over the queue's size limit was sent")
	} else if ce, ok := err.(*client.Error); !ok || ce.Code != client.CodeMessageSizeExceeded {
		t.Fatalf("oversized send: %v, want %s", err, client.CodeMessageSizeExceeded)
	}
	if d := dialled.Load(); d != 0 {
		t.Fatalf("the client dialled %d times", d)
	}
}
