package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// idleTestClock is the machine's clock moved forward by hand, wall and
// monotonic alike: what the nodes' idle tracking reads in these tests.
type idleTestClock struct {
	*clock.System
	ahead atomic.Int64
}

func (c *idleTestClock) Now() time.Time { return c.System.Now().Add(time.Duration(c.ahead.Load())) }
func (c *idleTestClock) Monotonic() time.Duration {
	return c.System.Monotonic() + time.Duration(c.ahead.Load())
}
func (c *idleTestClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// newIdleTestCluster starts n nodes whose idle tracking reads one clock
// the test moves, checked every 50 ms.
func newIdleTestCluster(t *testing.T, n int) (*testCluster, *idleTestClock) {
	clk := &idleTestClock{System: clock.NewSystem(0)}
	c := newTestClusterWith(t, n, func(cfg *Config) {
		cfg.idleClock = clk
		cfg.idleCheckEvery = 50 * time.Millisecond
	})
	return c, clk
}

func TestIdleEntitiesAreDeletedAndUsedOnesKept(t *testing.T) {
	c, clk := newIdleTestCluster(t, 3)
	cl := c.client(0)
	admin := cl.admin
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	five := durationpb.New(5 * time.Minute)

	if _, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "short", AutoDeleteOnIdle: durationpb.New(time.Minute)}}); errorInfo(t, err).GetReason() != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("auto_delete_on_idle of a minute: %v", err)
	}
	created, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: &raftbusv1.QueueProperties{Name: "idle", AutoDeleteOnIdle: five}})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.GetQueue().GetAutoDeleteOnIdle().AsDuration(); got != 5*time.Minute {
		t.Fatalf("created with auto_delete_on_idle %v", got)
	}
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "busy", AutoDeleteOnIdle: five})
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "kept"})
	if q, err := admin.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: "kept"}); err != nil || q.GetQueue().GetAutoDeleteOnIdle().AsDuration() != 1<<63-1 {
		t.Fatalf("a queue without the setting: %v, %v", q, err)
	}
	if _, err := admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "t", AutoDeleteOnIdle: five}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*raftbusv1.SubscriptionProperties{
		{TopicName: "t", SubscriptionName: "read", AutoDeleteOnIdle: durationpb.New(10 * time.Minute)},
		{TopicName: "t", SubscriptionName: "unread", AutoDeleteOnIdle: five},
	} {
		if _, err := admin.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{Subscription: s}); err != nil {
			t.Fatal(err)
		}
	}

	// Four minutes on, "busy" and the subscription "read" are used
	// (through another node than the one that created them); two more
	// and the rest has been idle for six.
	clk.advance(4 * time.Minute)
	sendOne(t, c.client(1), "busy", "m1")
	if _, err := c.client(2).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: "t/subscriptions/read", MaxMessages: 1}); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute)
	// The test looks at the metadata, not through the API: a call
	// would be a use.
	await.Until(t, 30*time.Second, "the idle queue and subscription deleted", func() bool {
		return !c.exists("idle") && !c.exists("t/subscriptions/unread")
	})
	// The topic is in use while "read" is: a peek two minutes ago. The
	// check runs every 50 ms: a few rounds must leave the rest alone.
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"busy", "kept", "t", "t/subscriptions/read"} {
		if !c.exists(name) {
			t.Fatalf("%s was deleted", name)
		}
	}

	// A queue created again under the name of one deleted as idle starts
	// over: the check must not take it for the old one.
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "idle", AutoDeleteOnIdle: five})
	time.Sleep(300 * time.Millisecond)
	if !c.exists("idle") {
		t.Fatal("the queue created again was deleted")
	}

	// Eleven minutes without use: everything with the setting goes, the
	// topic once its last subscription in use is idle too.
	clk.advance(11 * time.Minute)
	await.Until(t, 30*time.Second, "every idle entity deleted", func() bool {
		return !c.exists("busy") && !c.exists("idle") && !c.exists("t")
	})
	if !c.exists("kept") {
		t.Fatal("the queue without auto_delete_on_idle was deleted")
	}
}

// exists reports whether the first node's metadata holds the queue, topic
// or subscription path.
func (c *testCluster) exists(path string) bool {
	if topic, sub, ok := meta.SplitSubscriptionPath(path); ok {
		return meta.FindSubscription(c.nodes[0].meta.fsm.Entity(topic), sub) != nil
	}
	return c.nodes[0].meta.fsm.Entity(path) != nil
}
