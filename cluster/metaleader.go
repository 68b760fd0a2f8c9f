package cluster

import (
	"context"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// atMetaLeader runs local on the metadata leader, forwarding the call
// there (remote) from other nodes. For a read the leader first confirms
// that it still leads and is current (confirmLeadership), so that a
// deposed leader that has not noticed yet never answers from stale state.
func (n *Node) atMetaLeader(ctx context.Context, read bool,
	local func() error,
	remote func(ctx context.Context, conn grpc.ClientConnInterface) error,
) error {
	if n.meta.isLeader() {
		if read {
			if err := n.meta.confirmLeadership(ctx); err != nil {
				return err
			}
		}
		return local()
	}
	if routing.Forwarded(ctx) {
		return n.meta.notLeader()
	}
	addr := n.meta.leaderAddr()
	for attempt := 0; attempt < routing.MaxAttempts; attempt++ {
		if addr == "" {
			return apierror.Busy("the metadata group has no leader yet")
		}
		err := n.peers.Call(ctx, addr, func(ctx context.Context, conn grpc.ClientConnInterface) error {
			return remote(ctx, conn)
		})
		if err == nil {
			return nil
		}
		e := apierror.From(err)
		if e.Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER || e.Leader.GetAddress() == "" {
			return e
		}
		addr = e.Leader.GetAddress()
	}
	return apierror.Busy("the metadata leader moved while the request was forwarded")
}
