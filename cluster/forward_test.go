package cluster

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/proxy"
)

// lossyForward is a 3-node cluster with one queue whose partition leader
// is reached from another node, the forwarder, through a proxy that can
// lose the leader's answers: the forwarded request takes effect, the
// connection breaks before the answer is back.
type lossyForward struct {
	c         *testCluster
	leader    int
	forwarder clients // a client of the forwarding node
	proxy     *proxy.Proxy
}

func newLossyForward(t *testing.T, q *raftbusv1.QueueProperties) *lossyForward {
	t.Helper()
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), q)
	// The partition's preferred node takes its leadership back soon after
	// creation (on a loaded machine, after CreateQueue answered): wait
	// for it, so that the leader the proxy stands before stays the leader.
	preferred := c.nodes[0].meta.fsm.Entity(q.GetName()).GetPartitions()[0].GetNodeIds()[0]
	await.Until(t, 30*time.Second, "the preferred node to lead", func() bool {
		return c.nodes[c.leaderOf(q.GetName(), 0)].cfg.NodeID == preferred
	})
	lead := c.leaderOf(q.GetName(), 0)
	fwd := (lead + 1) % 3
	leaderAddr := c.nodes[lead].Addr()
	p := proxy.Start(t, leaderAddr)
	cc, err := grpc.NewClient(leaderAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(p.Dialer()))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[fwd].peers.Replace(leaderAddr, cc)
	return &lossyForward{c: c, leader: lead, forwarder: c.client(fwd), proxy: p}
}

// activeCount is the queue's count of active messages.
func (l *lossyForward) activeCount(t *testing.T, queue string) int64 {
	t.Helper()
	rt := retry(t, 10*time.Second, func(ctx context.Context) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
		return l.c.client(l.leader).admin.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: queue})
	})
	return rt.GetProperties().GetActiveMessageCount()
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestForwardedSendWhoseAnswerIsLostIsReportedUnknownAndStoredOnce(t *testing.T) {
	l := newLossyForward(t, &raftbusv1.QueueProperties{Name: "q"})
	l.proxy.DropResponses(1)
	_, err := l.forwarder.msg.Send(ctx10(t), &raftbusv1.SendRequest{EntityPath: "q", Messages: []*raftbusv1.Message{{Body: []byte("once")}}})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN || !isRetryable(err) {
		t.Fatalf("send whose answer was lost: %v; want OUTCOME_UNKNOWN", err)
	}
	if l.proxy.Dropped() != 1 {
		t.Fatalf("%d answers dropped", l.proxy.Dropped())
	}
	if n := l.activeCount(t, "q"); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
}

func TestForwardedSendWithDuplicateDetectionIsRepeated(t *testing.T) {
	l := newLossyForward(t, &raftbusv1.QueueProperties{Name: "dd", RequiresDuplicateDetection: proto.Bool(true)})
	l.proxy.DropResponses(1)
	resp, err := l.forwarder.msg.Send(ctx10(t), &raftbusv1.SendRequest{EntityPath: "dd", Messages: []*raftbusv1.Message{{MessageId: "m", Body: []byte("x")}}})
	if err != nil || !resp.GetResults()[0].GetDuplicate() {
		t.Fatalf("send: %v, %v; want the repeat accepted as a duplicate", resp, err)
	}
	if n := l.activeCount(t, "dd"); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
}

func TestForwardedReceiveAndDeleteWhoseAnswerIsLostLosesNothing(t *testing.T) {
	l := newLossyForward(t, &raftbusv1.QueueProperties{Name: "rad"})
	sendOne(t, l.c.client(l.leader), "rad", "first")
	sendOne(t, l.c.client(l.leader), "rad", "second")
	var got []string
	for range 2 {
		l.proxy.DropResponses(1)
		resp, err := l.forwarder.msg.Receive(ctx10(t), &raftbusv1.ReceiveRequest{EntityPath: "rad", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE})
		if err != nil || len(resp.GetMessages()) != 1 {
			t.Fatalf("receive: %v, %v", resp, err)
		}
		got = append(got, resp.GetMessages()[0].GetMessage().GetMessageId())
	}
	if got[0] != "first" || got[1] != "second" || l.proxy.Dropped() != 2 {
		t.Fatalf("received %v with %d answers lost; want first then second", got, l.proxy.Dropped())
	}
}

func TestForwardedPeekLockWhoseAnswerIsLostCountsOneDelivery(t *testing.T) {
	l := newLossyForward(t, &raftbusv1.QueueProperties{Name: "pl"})
	sendOne(t, l.c.client(l.leader), "pl", "first")
	sendOne(t, l.c.client(l.leader), "pl", "second")
	l.proxy.DropResponses(1)
	resp, err := l.forwarder.msg.Receive(ctx10(t), &raftbusv1.ReceiveRequest{EntityPath: "pl", MaxWait: durationpb.New(time.Second)})
	if err != nil || len(resp.GetMessages()) != 1 {
		t.Fatalf("receive: %v, %v", resp, err)
	}
	m := resp.GetMessages()[0]
	if m.GetMessage().GetMessageId() != "first" || m.GetDeliveryCount() != 1 {
		t.Fatalf("received %v; want the first message, delivered once", m)
	}
	rt := retry(t, 10*time.Second, func(ctx context.Context) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
		return l.c.client(l.leader).admin.GetQueueRuntimeProperties(ctx, &raftbusv1.GetQueueRuntimePropertiesRequest{Name: "pl"})
	})
	if n := rt.GetProperties().GetLockedMessageCount(); n != 1 {
		t.Fatalf("%d messages locked, want the one handed out", n)
	}

	// Completing it, the answer lost too: the forwarding node repeats it,
	// with its settlement id, the leader knows the repeat for one of a
	// settlement that took effect, and the caller hears that it did.
	l.proxy.DropResponses(1)
	_, err = l.forwarder.msg.Complete(ctx10(t), &raftbusv1.CompleteRequest{Lock: &raftbusv1.MessageLock{EntityPath: "pl", LockToken: m.GetLockToken()},
		SettlementId: []byte("complete-1")})
	if err != nil || l.proxy.Dropped() != 2 {
		t.Fatalf("complete whose answer was lost: %v after %d lost answers; want success", err, l.proxy.Dropped())
	}
	if n := l.activeCount(t, "pl"); n != 1 {
		t.Fatalf("%d messages active, want only the second", n)
	}
}

func TestDeferredReceiveAcrossPartitionsKeepsWhatItReceivedWhenALaterPartitionFails(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(0)
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "d", PartitionCount: proto.Uint32(2)})
	p0 := uint32(0)
	if _, err := cl.msg.Send(ctx10(t), &raftbusv1.SendRequest{EntityPath: "d", PartitionId: &p0, Messages: []*raftbusv1.Message{{MessageId: "kept"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := cl.msg.Receive(ctx10(t), &raftbusv1.ReceiveRequest{EntityPath: "d", PartitionId: &p0, MaxWait: durationpb.New(time.Second)})
	if err != nil || len(got.GetMessages()) != 1 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	m := got.GetMessages()[0]
	if _, err := cl.msg.Defer(ctx10(t), &raftbusv1.DeferRequest{Lock: &raftbusv1.MessageLock{EntityPath: "d", LockToken: m.GetLockToken(), PartitionId: 0}}); err != nil {
		t.Fatal(err)
	}
	// Partition 0 hands out its message; partition 1 has no such number.
	missing := int64(1<<48 | 999)
	resp, err := cl.msg.ReceiveDeferred(ctx10(t), &raftbusv1.ReceiveDeferredRequest{EntityPath: "d", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE,
		SequenceNumbers: []int64{m.GetSequenceNumber(), missing}})
	if err != nil || len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetMessage().GetMessageId() != "kept" {
		t.Fatalf("deferred receive: %v, %v; want the message partition 0 removed", resp, err)
	}
	_, err = cl.msg.ReceiveDeferred(ctx10(t), &raftbusv1.ReceiveDeferredRequest{EntityPath: "d", SequenceNumbers: []int64{missing}})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("asking for the missing number alone: %v; want NOT_FOUND", err)
	}
}
