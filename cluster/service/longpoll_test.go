package service

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestFirstAcrossServesWhatAnyPartitionHasWhileAnotherIsDown(t *testing.T) {
	down := apierror.Busy("partition 0 has no reachable leader")
	asked := 0
	got, err := firstAcross([]uint32{0, 1, 2}, time.Second, func(id uint32, wait time.Duration) (string, bool, error) {
		asked++
		switch id {
		case 0:
			return "", false, down
		case 2:
			return "message of 2", true, nil
		}
		return "", false, nil
	})
	if err != nil || got != "message of 2" || asked != 3 {
		t.Fatalf("got %q, %v after %d asks; want partition 2's message", got, err, asked)
	}
}

func TestFirstAcrossEndsEmptyWhenTheOthersHaveNothing(t *testing.T) {
	got, err := firstAcross([]uint32{1, 0}, 120*time.Millisecond, func(id uint32, wait time.Duration) (string, bool, error) {
		if id == 0 {
			return "", false, apierror.Busy("no leader")
		}
		time.Sleep(wait) // a partition with nothing waits out its slice
		return "", false, nil
	})
	if err != nil || got != "" {
		t.Fatalf("got %q, %v; want an empty answer", got, err)
	}
}

func TestFirstAcrossFailsWhenNoPartitionAnswers(t *testing.T) {
	_, err := firstAcross([]uint32{0, 1}, time.Minute, func(id uint32, wait time.Duration) (string, bool, error) {
		return "", false, apierror.Busy("partition %d has no reachable leader", id)
	})
	if apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("got %v; want SERVER_BUSY at once", err)
	}
}

func TestFirstAcrossStopsAtAnUnknownOutcome(t *testing.T) {
	unknown := apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN, "connection broke")
	asked := 0
	_, err := firstAcross([]uint32{0, 1, 2}, time.Second, func(id uint32, wait time.Duration) (string, bool, error) {
		asked++
		if id == 0 {
			return "", false, unknown
		}
		return "message", true, nil
	})
	if !errors.Is(err, unknown) || asked != 1 {
		t.Fatalf("got %v after %d asks; want the unknown outcome of partition 0, asking no further", err, asked)
	}
}

// A receive across partitions asks those its node leads first: they are
// served without a hop to another node.
func TestPollOrderAsksThePartitionsThisNodeLeadsFirst(t *testing.T) {
	const parts = 6
	node := newFakeNode("spread", parts)
	node.lead(1, 4)
	node.replicas[2] = &fakeReplica{leaderAddr: "10.0.0.2:7400"}
	s := NewMessaging(node)
	leads := map[uint32]bool{1: true, 4: true}
	for range parts {
		order := s.pollOrder(node.entity)
		seen := make(map[uint32]bool)
		for k, id := range order {
			seen[id] = true
			if leads[id] != (k < len(leads)) {
				t.Fatalf("the node leads %v; order %v does not ask those first", leads, order)
			}
		}
		if len(order) != parts || len(seen) != parts {
			t.Fatalf("order %v is not every partition once", order)
		}
	}
}

// spreadNode is a node of the 6-partition queue "spread" that leads
// partitions 0 and 3 and follows 1 and 4 (led by 10.0.0.2), 2 (led by
// 10.0.0.3) and 5, whose replica here last saw this node lead it (an old
// view: asked on its own).
func spreadNode() *fakeNode {
	node := newFakeNode("spread", 6)
	node.lead(0, 3)
	node.replicas[1] = &fakeReplica{leaderAddr: "10.0.0.2:7400"}
	node.replicas[2] = &fakeReplica{leaderAddr: "10.0.0.3:7400"}
	node.replicas[4] = &fakeReplica{leaderAddr: "10.0.0.2:7400"}
	node.replicas[5] = &fakeReplica{leaderAddr: node.addr}
	return node
}

// A receive across partitions looks by node: this node's partitions are
// one source, first; each other leader another, once; a partition whose
// leader is unknown, or that this node holds no replica of, is asked on
// its own.
func TestSourcesAreThisNodeFirstThenEachOtherLeaderOnce(t *testing.T) {
	node := spreadNode()
	s := NewMessaging(node)
	srcs := s.sources(node.entity, "spread", raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED)
	addrs := map[string]bool{}
	var alone []uint32
	for k, src := range srcs {
		switch {
		case src.local && k != 0, src.addr == node.addr, addrs[src.addr] && src.addr != "":
			t.Fatalf("sources %+v: this node first, each other leader once, never this node by address", srcs)
		case !src.local && src.addr == "":
			alone = append(alone, src.id)
		}
		addrs[src.addr] = true
	}
	if !srcs[0].local || !addrs["10.0.0.2:7400"] || !addrs["10.0.0.3:7400"] || len(alone) != 1 || alone[0] != 5 {
		t.Fatalf("sources %+v; want this node, 10.0.0.2, 10.0.0.3 and partition 5 alone", srcs)
	}

	// Awaiting messages at the partitions led here sees none in an empty
	// queue, and takes nothing when there are.
	if ok, err := s.awaitLocal(t.Context(), node.entity, "spread", raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, 0); ok || err != nil {
		t.Fatalf("awaiting messages in an empty queue: %v, %v", ok, err)
	}
	node.replicas[3].available = true
	if ok, err := s.awaitLocal(t.Context(), node.entity, "spread", raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, time.Second); !ok || err != nil {
		t.Fatalf("awaiting messages where partition 3 has one: %v, %v", ok, err)
	}
	if n := len(node.replicas[3].commands()); n != 0 {
		t.Fatalf("awaiting applied %d commands", n)
	}
}

// Where messages wait, the source holding the oldest comes first, as this
// node's replicas see them (a follower's view of another leader's
// partition included); the sources where nothing is seen waiting follow
// in the usual order. Among the partitions this node leads, a receive
// asks those with the oldest messages first.
func TestSourcesHoldingTheOldestMessagesComeFirst(t *testing.T) {
	node := spreadNode()
	s := NewMessaging(node)
	sub := raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED
	wait := func(id uint32, ms int64) { node.replicas[id].available, node.replicas[id].oldest = true, ms }
	wait(0, 500)
	wait(3, 300)
	wait(2, 100) // led by 10.0.0.3
	wait(4, 400) // led by 10.0.0.2
	srcs := s.sources(node.entity, "spread", sub)
	want := []source{{addr: "10.0.0.3:7400"}, {local: true}, {addr: "10.0.0.2:7400"}, {id: 5}}
	if !slices.Equal(srcs, want) {
		t.Fatalf("sources %+v; want %+v: 10.0.0.3 (100), here (300), 10.0.0.2 (400), partition 5 alone", srcs, want)
	}
	if order := s.localOrder(node.entity, "spread", sub); !slices.Equal(order, []uint32{3, 0}) {
		t.Fatalf("local order %v; want the partitions led here oldest message first: 3, 0", order)
	}
	// A partition asked alone that is seen holding the oldest message
	// comes first too.
	wait(5, 50)
	if srcs := s.sources(node.entity, "spread", sub); srcs[0] != (source{id: 5}) || len(srcs) != 4 {
		t.Fatalf("sources %+v; want partition 5 first, and each source once", srcs)
	}
}

// This node goes first while its oldest message came no more than
// LocalLead after the oldest anywhere, not a hop away for one a little
// older.
func TestSourcesHereFirstWhenItsOldestIsWithinTheLead(t *testing.T) {
	node := spreadNode()
	s := NewMessaging(node)
	sub := raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED
	lead := LocalLead.Milliseconds()
	wait := func(id uint32, ms int64) { node.replicas[id].available, node.replicas[id].oldest = true, ms }
	wait(2, 1000)        // led by 10.0.0.3
	wait(4, 1000+lead/2) // led by 10.0.0.2
	wait(3, 1000+lead)   // led here
	want := []source{{local: true}, {addr: "10.0.0.3:7400"}, {addr: "10.0.0.2:7400"}, {id: 5}}
	if srcs := s.sources(node.entity, "spread", sub); !slices.Equal(srcs, want) {
		t.Fatalf("sources %+v; want %+v: here (%d ms after the oldest) first", srcs, want, lead)
	}
	wait(3, 1000+lead+1)
	want = []source{{addr: "10.0.0.3:7400"}, {addr: "10.0.0.2:7400"}, {local: true}, {id: 5}}
	if srcs := s.sources(node.entity, "spread", sub); !slices.Equal(srcs, want) {
		t.Fatalf("sources %+v; want %+v: here (%d ms after the oldest) after the older", srcs, want, lead+1)
	}
}
