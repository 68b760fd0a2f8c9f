package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// membershipTimeout bounds how long a configuration change waits to enter
// Raft.
const membershipTimeout = 10 * time.Second

// ErrNotMember is returned by Demote for a node the group does not know
// and no address was given for.
var ErrNotMember = errors.New("not a member of the group")

// Members is the group's latest configuration.
func (p *Partition) Members() ([]raft.Server, error) {
	f := p.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("partition %s: configuration: %w", p.name, err)
	}
	return f.Configuration().Servers, nil
}

// Suffrage is id's suffrage in the group's latest configuration; Staging
// when it is not in it (or the configuration cannot be read).
func (p *Partition) Suffrage(id string) raft.ServerSuffrage {
	members, err := p.Members()
	if err != nil {
		return raft.Staging
	}
	for _, s := range members {
		if string(s.ID) == id {
			return s.Suffrage
		}
	}
	return raft.Staging
}

// Promote makes the member id a voter, on the leader.
func (p *Partition) Promote(ctx context.Context, id, addr string) error {
	if !p.IsLeader() {
		return p.notLeader()
	}
	return p.changeMembers(ctx, p.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout), "promote "+id)
}

// Demote takes id's vote, on the leader: a voter becomes a non-voter, and a
// node the group does not know joins as one at addr (ErrNotMember when
// addr is empty). A non-voter is left as it is. It returns an index at
// or after the configuration in which id is a non-voter: a configuration
// that makes it a voter again comes after it (see VoterSince).
func (p *Partition) Demote(ctx context.Context, id, addr string) (uint64, error) {
	if !p.IsLeader() {
		// A follower's configuration may be behind the leader's.
		return 0, p.notLeader()
	}
	var f raft.IndexFuture
	switch p.Suffrage(id) {
	case raft.Nonvoter:
		// hashicorp/raft does not say at which index its configuration
		// took effect; its last entry is at or after it.
		return p.raft.LastIndex(), nil
	case raft.Voter:
		f = p.raft.DemoteVoter(raft.ServerID(id), 0, membershipTimeout)
	default:
		if addr == "" {
			return 0, fmt.Errorf("partition %s: demote %s: %w", p.name, id, ErrNotMember)
		}
		f = p.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout)
	}
	if err := p.changeMembers(ctx, f, "demote "+id); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// VoterSince reports whether id is a voter in the group's latest
// configuration, as this replica knows it once it has applied the entry at
// index. A replica rebuilt from its leader's log replays the group's older
// configurations on the way, some in which it still voted: only once it
// has passed its demotion (index, from Demote) does a configuration in
// which it votes mean that it votes again.
func (p *Partition) VoterSince(id string, index uint64) bool {
	return p.raft.AppliedIndex() >= index && p.Suffrage(id) == raft.Voter
}

// changeMembers waits for a configuration change; a replica that does not
// lead answers with NotLeader's error.
func (p *Partition) changeMembers(ctx context.Context, f raft.Future, what string) error {
	err := p.await(ctx, f)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return p.notLeader()
	}
	return fmt.Errorf("partition %s: %s: %w", p.name, what, err)
}

// AddLearner adds id at addr as a non-voter, on the leader: a replica that
// joins the group catches up by snapshot and log without counting towards
// any quorum, and is made a voter (Promote) once it has. A node the group
// knows already is left as it is.
func (p *Partition) AddLearner(ctx context.Context, id, addr string) error {
	if !p.IsLeader() {
		return p.notLeader()
	}
	if p.Suffrage(id) != raft.Staging {
		return nil
	}
	return p.changeMembers(ctx, p.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout), "add "+id)
}

// RemoveMember takes id out of the group, on the leader. The leader does
// not remove itself: it hands leadership over first.
func (p *Partition) RemoveMember(ctx context.Context, id string) error {
	if !p.IsLeader() {
		return p.notLeader()
	}
	if id == p.cfg.NodeID {
		return fmt.Errorf("partition %s: the leader does not remove itself", p.name)
	}
	if p.Suffrage(id) == raft.Staging {
		return nil
	}
	return p.changeMembers(ctx, p.raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout), "remove "+id)
}
