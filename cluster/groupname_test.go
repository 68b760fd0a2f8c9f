package cluster

import (
	"testing"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// A group's name is in every node's log and data directory: it must not
// change between versions, and a replica is found under it.
func TestGroupNameIsEntityIncarnationAndPartition(t *testing.T) {
	e := &clusterv1.Entity{Name: "orders/eu", Incarnation: 18446744073709551615}
	if got, want := groupName(e, 15), "orders/eu@18446744073709551615/15"; got != want {
		t.Fatalf("groupName = %q, want %q", got, want)
	}
	n := &Node{replicas: map[string]*replica{"orders/eu@18446744073709551615/15": {id: 15}}}
	if r := n.replica(e, 15); r == nil || r.id != 15 {
		t.Fatalf("replica(e, 15) = %v, want the replica under its group name", r)
	}
	if r := n.replica(e, 1); r != nil {
		t.Fatalf("replica(e, 1) = %v, want none", r)
	}
}
