package idle

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// fakeClock is a clock.Source a test moves by hand.
type fakeClock struct{ mono atomic.Int64 }

func (c *fakeClock) Now() time.Time           { return time.Unix(0, c.mono.Load()) }
func (c *fakeClock) Monotonic() time.Duration { return time.Duration(c.mono.Load()) }
func (c *fakeClock) advance(d time.Duration)  { c.mono.Add(int64(d)) }

func TestTrackerReportsIdleSinceLastUseNeverLongerThanItRan(t *testing.T) {
	c := &fakeClock{}
	c.advance(time.Hour)
	tr := NewTracker(c, func(string) bool { return true })
	c.advance(10 * time.Minute)
	if got := tr.IdleFor("q"); got != 10*time.Minute {
		t.Fatalf("never used: idle %v, want the 10m the tracker ran", got)
	}
	tr.Use(Paths("t/subscriptions/s/$DeadLetterQueue")...)()
	c.advance(time.Minute)
	if got, topic := tr.IdleFor("t/subscriptions/s"), tr.IdleFor("t"); got != time.Minute || topic != time.Minute {
		t.Fatalf("a subscription's dead-letter queue used a minute ago: idle %v, its topic %v", got, topic)
	}
	done := tr.Use("q")
	c.advance(time.Hour)
	if got := tr.IdleFor("q"); got != 0 {
		t.Fatalf("in use: idle %v", got)
	}
	done()
	c.advance(time.Second)
	if got := tr.IdleFor("q"); got != time.Second {
		t.Fatalf("a call ended a second ago: idle %v", got)
	}
}

func TestTrackerForgetsPathsOfNoEntity(t *testing.T) {
	c := &fakeClock{}
	tr := NewTracker(c, func(p string) bool { return p == "q" })
	tr.Use("q")()
	for i := 0; i < 10*minPrune; i++ {
		tr.Use(fmt.Sprintf("missing-%d", i))()
	}
	if n := tr.Len(); n > minPrune {
		t.Fatalf("tracker holds %d paths after calls on %d that name no entity", n, 10*minPrune)
	}
	c.advance(time.Minute)
	if got := tr.IdleFor("q"); got != time.Minute {
		t.Fatalf("an entity's use was pruned: idle %v", got)
	}
}

func TestCandidatesAndDue(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	never := durationpb.New(1<<63 - 1)
	s := &clusterv1.MetaSnapshot{Entities: []*clusterv1.Entity{
		{Name: "q", Kind: clusterv1.EntityKind_ENTITY_KIND_QUEUE, Incarnation: 7, Generation: 2, Queue: &raftbusv1.QueueProperties{
			Name: "q", AutoDeleteOnIdle: durationpb.New(10 * time.Minute), CreatedAt: timestamppb.New(created), UpdatedAt: timestamppb.New(created.Add(time.Hour)),
		}},
		{Name: "old", Kind: clusterv1.EntityKind_ENTITY_KIND_QUEUE, Queue: &raftbusv1.QueueProperties{Name: "old"}},
		{Name: "t", Kind: clusterv1.EntityKind_ENTITY_KIND_TOPIC, Incarnation: 9, Topic: &raftbusv1.TopicProperties{Name: "t", AutoDeleteOnIdle: never},
			Subscriptions: []*clusterv1.Subscription{{Properties: &raftbusv1.SubscriptionProperties{
				TopicName: "t", SubscriptionName: "s", AutoDeleteOnIdle: durationpb.New(5 * time.Minute), CreatedAt: timestamppb.New(created),
			}}}},
	}}
	got := Candidates(s)
	if len(got) != 2 || got[0].Path != "q" || got[0].Guard.GetIncarnation() != 7 || got[0].Guard.GetGeneration() != 2 || !got[0].Updated.Equal(created.Add(time.Hour)) ||
		got[1].Path != "t/subscriptions/s" || got[1].Topic != "t" || got[1].Subscription != "s" || got[1].Guard.GetIncarnation() != 9 {
		t.Fatalf("candidates %+v", got)
	}
	q := got[0]
	for _, c := range []struct {
		idle time.Duration
		now  time.Time
		due  bool
	}{
		{10 * time.Minute, created.Add(2 * time.Hour), true},
		{10*time.Minute - 1, created.Add(2 * time.Hour), false},    // a node saw it used
		{time.Hour, created.Add(time.Hour + 9*time.Minute), false}, // changed 9 minutes ago
		{time.Hour, created.Add(time.Hour + 10*time.Minute), true},
	} {
		if Due(q, c.idle, c.now) != c.due {
			t.Errorf("idle %v at %v: due %v", c.idle, c.now, !c.due)
		}
	}
}

func TestRequestPathsNameTheEntitiesACallUses(t *testing.T) {
	lock := func(p string) *raftbusv1.MessageLock { return &raftbusv1.MessageLock{EntityPath: p} }
	for _, c := range []struct {
		req  any
		want string
	}{
		{&raftbusv1.SendRequest{EntityPath: "q"}, "q"},
		{&raftbusv1.ReceiveRequest{EntityPath: "t/subscriptions/s"}, "t/subscriptions/s t"},
		{&raftbusv1.PeekRequest{EntityPath: "q/$DeadLetterQueue"}, "q"},
		{&raftbusv1.CompleteRequest{Lock: lock("q")}, "q"},
		{&raftbusv1.SettleRequest{Settlements: []*raftbusv1.Settlement{{Lock: lock("a")}, {Lock: lock("a")}, {Lock: lock("b")}}}, "a b"},
		{&raftbusv1.GetQueueRequest{Name: "q"}, "q"},
		{&raftbusv1.UpdateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "t"}}, "t"},
		{&raftbusv1.GetRuleRequest{TopicName: "t", SubscriptionName: "s"}, "t/subscriptions/s t"},
		{&raftbusv1.UpdateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{TopicName: "t", SubscriptionName: "s"}}, "t/subscriptions/s t"},
		{&raftbusv1.ListQueuesRequest{}, ""},
		{&raftbusv1.ListSubscriptionsRequest{TopicName: "t"}, ""},
		{&raftbusv1.DeleteAccessPolicyRequest{Name: "p"}, ""},
	} {
		if got := strings.Join(RequestPaths(c.req), " "); got != c.want {
			t.Errorf("%T: paths %q, want %q", c.req, got, c.want)
		}
	}
}

// TestTrackerServesConcurrentCalls runs calls on entities and on missing
// paths at once (pruning included) under the race detector: an entity in
// use is never reported idle.
func TestTrackerServesConcurrentCalls(t *testing.T) {
	c := &fakeClock{}
	tr := NewTracker(c, func(p string) bool { return !strings.HasPrefix(p, "missing") })
	hold := tr.Use("held")
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				tr.Use("q", fmt.Sprintf("missing-%d-%d", g, i))()
				c.advance(time.Millisecond)
				if tr.IdleFor("held") != 0 {
					t.Error("an entity in use reported idle")
					return
				}
			}
		}()
	}
	wg.Wait()
	hold()
	if n := tr.Len(); n > 2*minPrune+2 {
		t.Fatalf("%d paths kept", n)
	}
}
