package meta

import (
	"bytes"
	"io"
	"testing"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

var sendOnly = []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_SEND}

func putPolicyCmd(name, entity string, create bool, rights ...raftbusv1.AccessRight) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{NowUnixMs: 2000, Body: &clusterv1.MetaCommand_PutAccessPolicy{PutAccessPolicy: &clusterv1.PutAccessPolicy{
		Create: create,
		Policy: &raftbusv1.AccessPolicy{Name: name, EntityPath: entity, Rights: rights, PrimaryKey: "p", SecondaryKey: "s"},
	}}}
}

func deletePolicyCmd(name, entity string) *clusterv1.MetaCommand {
	return &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteAccessPolicy{DeleteAccessPolicy: &clusterv1.DeleteAccessPolicy{Name: name, EntityPath: entity}}}
}

func TestAccessPolicies(t *testing.T) {
	f := NewFSM()
	manageAll := []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE, raftbusv1.AccessRight_ACCESS_RIGHT_SEND, raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN}
	res := applyAll(t, f,
		addNode("n1"),
		putQueueCmd("orders", 1, true),
		putPolicyCmd("app", "", true, sendOnly...),       // 3: created
		putPolicyCmd("app", "orders", true, sendOnly...), // 4: same name, another scope
		putPolicyCmd("app", "", true, sendOnly...),       // 5: exists
		putPolicyCmd("nope", "", false, sendOnly...),     // 6: update of none
		putPolicyCmd("x", "missing", true, sendOnly...),  // 7: no such entity
		putPolicyCmd("bad name!", "", true, sendOnly...), // 8
		putPolicyCmd("norights", "", true),               // 9
		putPolicyCmd("mgr", "", true, manageAll[0]),      // 10: Manage alone
		putPolicyCmd("root", "", true, manageAll...),     // 11
		putPolicyCmd("app", "", false, manageAll...),     // 12: updated
		deletePolicyCmd("root", ""),                      // 13
		deletePolicyCmd("root", ""),                      // 14: gone
		&clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: "orders"}}},
	)
	want := []raftbusv1.ErrorReason{0, 0, 0, 0,
		raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND,
		raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
		0, 0, 0, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, 0,
	}
	for i, r := range res {
		if r.GetErrorReason() != want[i] {
			t.Errorf("command %d: %v %s, want %v", i+1, r.GetErrorReason(), r.GetErrorMessage(), want[i])
		}
	}
	f.View(func(s *clusterv1.MetaSnapshot) {
		// The entity's policy went with it; the namespace's was updated.
		if len(s.AccessPolicies) != 1 {
			t.Fatalf("policies %v", s.AccessPolicies)
		}
		p := FindPolicy(s, "", "app")
		if len(p.GetRights()) != 3 || p.GetCreatedAt().AsTime().UnixMilli() != 2000 {
			t.Fatalf("app after update: %v", p)
		}
	})
	// Snapshots keep them.
	g := NewFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	g.View(func(s *clusterv1.MetaSnapshot) {
		if FindPolicy(s, "", "app") == nil {
			t.Fatal("policy lost across a snapshot")
		}
	})
}
