package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestLeaderWithAnOutdatedViewKeepsNewerSubscriptions feeds a partition
// leader the definition of a topic from before a subscription was created,
// after the partition was configured with the subscription and it holds
// messages: what a node whose metadata lags does when it takes over the
// partition. The subscription and its messages must survive.
func TestLeaderWithAnOutdatedViewKeepsNewerSubscriptions(t *testing.T) {
	c := newTestCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.client(0)
	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.CreateTopicResponse, error) {
		return cl.admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "events"}})
	})
	n := c.nodes[0]
	outdated := n.meta.fsm.Entity("events")
	_, err := cl.admin.CreateSubscription(ctx, &raftbusv1.CreateSubscriptionRequest{
		Subscription: &raftbusv1.SubscriptionProperties{TopicName: "events", SubscriptionName: "audit"},
	})
	if err != nil {
		t.Fatal(err)
	}
	const sent = 5
	for i := range sent {
		_, err := cl.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: "events", Messages: []*raftbusv1.Message{{MessageId: fmt.Sprint(i), Body: []byte("acknowledged")}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	current := n.meta.fsm.Entity("events")
	if outdated.GetGeneration() >= current.GetGeneration() {
		t.Fatalf("generations %d then %d: creating a subscription must raise the topic's", outdated.GetGeneration(), current.GetGeneration())
	}

	r := n.replica(outdated, 0)
	// A node that never led the partition has configured nothing yet.
	r.configured.Store(0)
	err = n.configure(r, outdated)
	if partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("configuring from generation %d after %d: %v, want a SERVER_BUSY refusal", outdated.GetGeneration(), current.GetGeneration(), err)
	}
	var held int64
	var herr error
	var applied uint64
	r.p.ReadApplied(func(e *engine.Engine) {
		var p *raftbusv1.PartitionRuntimeProperties
		p, herr = e.RuntimeProperties("events/subscriptions/audit")
		held = p.GetActiveMessageCount()
		applied = e.Generation("events")
	})
	if herr != nil || held != sent {
		t.Fatalf("subscription after an outdated configuration: %d messages, err %v; want %d", held, herr, sent)
	}
	// The reconciler sees that the partition was configured from a newer
	// view than its own and waits; with the current view it configures the
	// partition again.
	if applied != current.GetGeneration() {
		t.Fatalf("applied generation %d, want %d", applied, current.GetGeneration())
	}
	if err := n.configure(r, current); err != nil {
		t.Fatalf("configure from the current view: %v", err)
	}
	if got := drain(t, cl, "events/subscriptions/audit", sent, 20*time.Second); len(got) != sent {
		t.Fatalf("received %v", got)
	}
}
