package meta

import (
	"testing"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func guardedDelete(name string, g *clusterv1.EntityGuard) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: name, Guard: g}}}
}

func guardedDeleteSubscription(topic, name string, g *clusterv1.EntityGuard) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteSubscription{DeleteSubscription: &clusterv1.DeleteSubscription{
		TopicName: topic, SubscriptionName: name, Guard: g,
	}}}
}

// TestGuardedDeleteSparesARecreatedOrChangedEntity checks what the idle
// check relies on: a deletion guarded by an entity's incarnation and
// generation deletes that entity only, never one created again under its
// name, nor one changed since.
func TestGuardedDeleteSparesARecreatedOrChangedEntity(t *testing.T) {
	f := NewFSM()
	applyAll(t, f, addNode("n1"), putQueueCmd("q", 1, true))
	old := f.Entity("q")
	res := applyAll(t, f, addNode("n1"), putQueueCmd("q", 1, true), // entries 1, 2 again: no-ops
		deleteEntity("q"), putQueueCmd("q", 1, true), guardedDelete("q", &clusterv1.EntityGuard{Incarnation: old.GetIncarnation(), Generation: old.GetGeneration()}))
	if r := res[len(res)-1]; r.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND || f.Entity("q") == nil {
		t.Fatalf("guarded delete of the old incarnation: %v; queue left %v", r, f.Entity("q"))
	}
	now := f.Entity("q")
	f.Apply(entry(t, 10, putQueueCmd("q", 1, false))) // an update: generation + 1
	if r := f.Apply(entry(t, 11, guardedDelete("q", &clusterv1.EntityGuard{Incarnation: now.GetIncarnation(), Generation: now.GetGeneration()}))).(*clusterv1.MetaResult); r.GetErrorReason() == raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED || f.Entity("q") == nil {
		t.Fatalf("guarded delete after an update: %v", r)
	}
	cur := f.Entity("q")
	if r := f.Apply(entry(t, 12, guardedDelete("q", &clusterv1.EntityGuard{Incarnation: cur.GetIncarnation(), Generation: cur.GetGeneration()}))).(*clusterv1.MetaResult); r.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED || f.Entity("q") != nil {
		t.Fatalf("guarded delete of the current entity: %v", r)
	}
}

func TestGuardedSubscriptionDeleteSparesAChangedTopic(t *testing.T) {
	f := NewFSM()
	applyAll(t, f, addNode("n1"), fwdTopic("t"), fwdSubscription("t", "s", "", "", true))
	before := f.Entity("t")
	g := &clusterv1.EntityGuard{Incarnation: before.GetIncarnation(), Generation: before.GetGeneration()}
	f.Apply(entry(t, 4, fwdSubscription("t", "other", "", "", true)))
	if r := f.Apply(entry(t, 5, guardedDeleteSubscription("t", "s", g))).(*clusterv1.MetaResult); r.GetErrorReason() == raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		t.Fatalf("guarded delete after the topic changed: %v", r)
	}
	now := f.Entity("t")
	g = &clusterv1.EntityGuard{Incarnation: now.GetIncarnation(), Generation: now.GetGeneration()}
	if r := f.Apply(entry(t, 6, guardedDeleteSubscription("t", "s", g))).(*clusterv1.MetaResult); r.GetErrorReason() != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED || len(f.Entity("t").GetSubscriptions()) != 1 {
		t.Fatalf("guarded delete of the current subscription: %v", r)
	}
}
