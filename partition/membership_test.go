package partition_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

func TestDemoteAndPromoteChangeAFollowersVote(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	p := c.replicas[l]
	f := nodeID((l + 1) % 3)
	ctx := context.Background()
	if got := p.Suffrage(f); got != raft.Voter {
		t.Fatalf("%s before: %v, want Voter", f, got)
	}
	if err := p.Demote(ctx, f, ""); err != nil {
		t.Fatalf("demote %s: %v", f, err)
	}
	if got := p.Suffrage(f); got != raft.Nonvoter {
		t.Fatalf("%s after demote: %v, want Nonvoter", f, got)
	}
	if err := p.Demote(ctx, f, ""); err != nil {
		t.Fatalf("demote a non-voter again: %v, want nil", err)
	}
	if err := p.Promote(ctx, f, f); err != nil {
		t.Fatalf("promote %s: %v", f, err)
	}
	if got := p.Suffrage(f); got != raft.Voter {
		t.Fatalf("%s after promote: %v, want Voter", f, got)
	}
	if err := p.Demote(ctx, "stranger", ""); !errors.Is(err, partition.ErrNotMember) {
		t.Fatalf("demote a node the group does not know, without address: %v, want ErrNotMember", err)
	}
	follower := c.replicas[(l+2)%3]
	if err := follower.Demote(ctx, f, ""); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER {
		t.Fatalf("demote on a follower: %v, want NOT_LEADER", err)
	}
	members, err := p.Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members %v, %v; want the 3 replicas", members, err)
	}
}
