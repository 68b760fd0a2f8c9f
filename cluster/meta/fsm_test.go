package meta

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func entry(t *testing.T, index uint64, cmd *clusterv1.MetaCommand) *raft.Log {
	t.Helper()
	b, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b}
}

func addNode(id string) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_AddNode{AddNode: &clusterv1.AddNode{Node: &clusterv1.Node{NodeId: id, Address: id + ":7400"}}}}
}

func putQueueCmd(name string, parts uint32, create bool) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{NowUnixMs: 1000, Body: &clusterv1.MetaCommand_PutQueue{PutQueue: &clusterv1.PutQueue{
		Queue:  &raftbusv1.QueueProperties{Name: name, PartitionCount: proto.Uint32(parts), RequiresSession: proto.Bool(false)},
		Create: create,
	}}}
}

// applyAll runs cmds on f from log index 1 and returns the results.
func applyAll(t *testing.T, f *FSM, cmds ...*clusterv1.MetaCommand) []*clusterv1.MetaResult {
	t.Helper()
	var out []*clusterv1.MetaResult
	for i, c := range cmds {
		out = append(out, f.Apply(entry(t, uint64(i+1), c)).(*clusterv1.MetaResult))
	}
	return out
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

func TestSameCommandsGiveSameStateAndSnapshotsRestoreIt(t *testing.T) {
	cmds := []*clusterv1.MetaCommand{
		{Body: &clusterv1.MetaCommand_SetClusterId{SetClusterId: &clusterv1.SetClusterID{ClusterId: "c1"}}},
		addNode("n3"), addNode("n1"), addNode("n2"),
		putQueueCmd("b", 3, true), putQueueCmd("a", 1, true), putQueueCmd("c", 2, true),
		&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: "c"}}},
	}
	f1, f2 := NewFSM(), NewFSM()
	applyAll(t, f1, cmds...)
	applyAll(t, f2, cmds...)
	s1 := snapshotBytes(t, f1)
	if !bytes.Equal(s1, snapshotBytes(t, f2)) {
		t.Fatal("two replicas applying the same commands differ")
	}
	// The restored replica had a queue "c" of its own and handed it out:
	// after the restore it is gone, and "b" is the snapshot's.
	restored := NewFSM()
	applyAll(t, restored, addNode("n1"), putQueueCmd("c", 1, true), putQueueCmd("b", 1, true))
	if restored.Entity("c") == nil || len(restored.Entity("b").GetPartitions()) != 1 {
		t.Fatal("queues before the restore")
	}
	if err := restored.Restore(io.NopCloser(bytes.NewReader(s1))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s1, snapshotBytes(t, restored)) {
		t.Fatal("restored state differs from the snapshot")
	}
	restored.View(func(s *clusterv1.MetaSnapshot) {
		if s.ClusterId != "c1" || len(s.Nodes) != 3 || len(s.Entities) != 2 || s.Entities[0].Name != "a" || s.Nodes[0].NodeId != "n1" {
			t.Fatalf("restored state %v", s)
		}
	})
	if restored.Entity("c") != nil || len(restored.Entity("b").GetPartitions()) != 3 {
		t.Fatal("Entity answers from before the restore")
	}
}

func TestPlacementSpreadsPartitionsAndPreferredLeaders(t *testing.T) {
	var nodes []*clusterv1.Node
	for i := 1; i <= 5; i++ {
		nodes = append(nodes, &clusterv1.Node{NodeId: fmt.Sprintf("n%d", i)})
	}
	placement := Place(nodes, "orders", 10)
	first := make(map[string]int)
	for id, p := range placement {
		if len(p.NodeIds) != ReplicationFactor {
			t.Fatalf("partition %d has %d replicas", id, len(p.NodeIds))
		}
		seen := map[string]bool{}
		for _, n := range p.NodeIds {
			if seen[n] {
				t.Fatalf("partition %d placed twice on %s", id, n)
			}
			seen[n] = true
		}
		first[p.NodeIds[0]]++
	}
	for _, n := range nodes {
		if first[n.NodeId] != 2 {
			t.Fatalf("preferred leaders %v: want 2 per node", first)
		}
	}
	if got := Place(nodes[:2], "orders", 1)[0].NodeIds; len(got) != 2 {
		t.Fatalf("two nodes: %v, want both", got)
	}
}

func TestQueueRulesEnforcedByTheStateMachine(t *testing.T) {
	f := NewFSM()
	res := applyAll(t, f, putQueueCmd("q", 1, true))
	if res[0].ErrorReason != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY {
		t.Fatalf("create with no members: %v", res[0])
	}
	f = NewFSM()
	res = applyAll(t, f, addNode("n1"), putQueueCmd("q", 2, true), putQueueCmd("q", 2, true), putQueueCmd("q", 3, false), putQueueCmd("nope", 1, false), putQueueCmd("q", 2, false))
	want := []raftbusv1.ErrorReason{
		raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
		raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
		raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS,
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, // partition count is fixed
		raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND,
		raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
	}
	for i, r := range res {
		if r.ErrorReason != want[i] {
			t.Errorf("command %d: %v, want %v", i, r, want[i])
		}
	}
	e := f.Entity("q")
	if e.Generation != 2 || e.Incarnation != 2 || len(e.Partitions) != 2 {
		t.Fatalf("entity after one update: %v", e)
	}
}

// TestEveryChangeToATopicRaisesItsGeneration checks what partitions rely on
// to refuse outdated configurations: a topic's generation grows with every
// change to it, its subscriptions or their rules, refused changes leave it
// alone, and a topic deleted and created again is a new incarnation.
func TestEveryChangeToATopicRaisesItsGeneration(t *testing.T) {
	sub := &raftbusv1.SubscriptionProperties{TopicName: "t", SubscriptionName: "s"}
	rule := &raftbusv1.RuleProperties{Name: "r"}
	topic := func(create bool) *clusterv1.MetaCommand {
		return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutTopic{PutTopic: &clusterv1.PutTopic{
			Topic: &raftbusv1.TopicProperties{Name: "t", PartitionCount: proto.Uint32(1)}, Create: create,
		}}}
	}
	changes := []struct {
		name string
		cmd  *clusterv1.MetaCommand
		ok   bool
	}{
		{"create subscription", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutSubscription{PutSubscription: &clusterv1.PutSubscription{Subscription: sub, Create: true}}}, true},
		{"create it again", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutSubscription{PutSubscription: &clusterv1.PutSubscription{Subscription: sub, Create: true}}}, false},
		{"update subscription", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutSubscription{PutSubscription: &clusterv1.PutSubscription{Subscription: sub}}}, true},
		{"create rule", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutRule{PutRule: &clusterv1.PutRule{TopicName: "t", SubscriptionName: "s", Rule: rule, Create: true}}}, true},
		{"update rule", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_PutRule{PutRule: &clusterv1.PutRule{TopicName: "t", SubscriptionName: "s", Rule: rule}}}, true},
		{"delete rule", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteRule{DeleteRule: &clusterv1.DeleteRule{TopicName: "t", SubscriptionName: "s", RuleName: "r"}}}, true},
		{"delete missing rule", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteRule{DeleteRule: &clusterv1.DeleteRule{TopicName: "t", SubscriptionName: "s", RuleName: "r"}}}, false},
		{"update topic", topic(false), true},
		{"delete subscription", &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteSubscription{DeleteSubscription: &clusterv1.DeleteSubscription{TopicName: "t", SubscriptionName: "s"}}}, true},
	}
	f := NewFSM()
	applyAll(t, f, addNode("n1"), topic(true))
	index := uint64(3)
	gen := f.Entity("t").GetGeneration()
	for _, c := range changes {
		res := f.Apply(entry(t, index, c.cmd)).(*clusterv1.MetaResult)
		index++
		if ok := res.GetErrorReason() == raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED; ok != c.ok {
			t.Fatalf("%s: %v", c.name, res)
		}
		next := f.Entity("t").GetGeneration()
		if c.ok && next <= gen || !c.ok && next != gen {
			t.Fatalf("%s: generation %d -> %d", c.name, gen, next)
		}
		gen = next
	}
	incarnation := f.Entity("t").GetIncarnation()
	f.Apply(entry(t, index, &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: "t"}}}))
	f.Apply(entry(t, index+1, topic(true)))
	if e := f.Entity("t"); e.GetIncarnation() == incarnation {
		t.Fatalf("a topic created again kept incarnation %d: its partitions would meet the old ones' generations", incarnation)
	}
}

func TestAMembersIncarnationIsRecordedOnceAndKept(t *testing.T) {
	incarnated := func(id, inc string) *clusterv1.MetaCommand {
		return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_AddNode{AddNode: &clusterv1.AddNode{
			Node: &clusterv1.Node{NodeId: id, Address: id + ":7400", Incarnation: inc}}}}
	}
	f := NewFSM()
	res := applyAll(t, f,
		addNode("n1"),           // recorded from the Raft configuration, no incarnation yet
		incarnated("n1", "i1"),  // adopted
		addNode("n1"),           // an address update keeps it
		incarnated("n1", "i2"),  // a wiped data dir: refused
		incarnated("n2", "i20"), // a new member with its incarnation
	)
	want := []raftbusv1.ErrorReason{0, 0, 0, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, 0}
	for i, r := range res {
		if r.ErrorReason != want[i] {
			t.Errorf("command %d: %v, want %v", i, r, want[i])
		}
	}
	f.View(func(s *clusterv1.MetaSnapshot) {
		if len(s.Nodes) != 2 || s.Nodes[0].Incarnation != "i1" || s.Nodes[1].Incarnation != "i20" {
			t.Fatalf("members %v, want n1 as i1 and n2 as i20", s.Nodes)
		}
	})
}
