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
	if !p.VoterSince(f, 0) {
		t.Fatalf("%s is not a voter since the start", f)
	}
	demoted, err := p.Demote(ctx, f, "")
	if err != nil {
		t.Fatalf("demote %s: %v", f, err)
	}
	if got := p.Suffrage(f); got != raft.Nonvoter {
		t.Fatalf("%s after demote: %v, want Nonvoter", f, got)
	}
	if again, err := p.Demote(ctx, f, ""); err != nil || again < demoted {
		t.Fatalf("demote a non-voter again: index %d, %v; want %d or later, nil", again, err, demoted)
	}
	if p.VoterSince(f, 0) || p.VoterSince(f, demoted) {
		t.Fatalf("%s counts as a voter after its demotion", f)
	}
	c.converged()
	if follower := c.replicas[(l+1)%3]; follower.VoterSince(f, demoted+1000) {
		t.Fatalf("%s counts as a voter on a replica that has not passed its demotion", f)
	}
	if err := p.Promote(ctx, f, f); err != nil {
		t.Fatalf("promote %s: %v", f, err)
	}
	if got := p.Suffrage(f); got != raft.Voter {
		t.Fatalf("%s after promote: %v, want Voter", f, got)
	}
	if !p.VoterSince(f, demoted) {
		t.Fatalf("%s promoted after its demotion at %d does not vote since", f, demoted)
	}
	if _, err := p.Demote(ctx, "stranger", ""); !errors.Is(err, partition.ErrNotMember) {
		t.Fatalf("demote a node the group does not know, without address: %v, want ErrNotMember", err)
	}
	follower := c.replicas[(l+2)%3]
	if _, err := follower.Demote(ctx, f, ""); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER {
		t.Fatalf("demote on a follower: %v, want NOT_LEADER", err)
	}
	members, err := p.Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members %v, %v; want the 3 replicas", members, err)
	}
}
