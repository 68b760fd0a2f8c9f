package cluster

import (
	"context"
	"reflect"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/rpcreach"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A receive across the partitions of an entity looks by node, not by
// partition: at the partitions this node leads all at once, then at each
// other node that leads some, which looks at its own all at once; first
// without waiting, then waiting up to pollSlice at each in turn. Asking
// partition by partition (one forwarded call each, then 50 ms of waiting
// each) had left a message sent to an idle 16-partition queue waiting up
// to most of a second.
//
// It stays a receive of one partition: whatever the source, the first
// partition that hands out messages ends the search, so a receive id has
// messages in at most one partition (see Node.replay).

// receiveAcross receives from whichever partition of e has messages first,
// waiting up to wait. A node asked by another (forwarding refused) looks
// only at the partitions it leads.
func (n *Node) receiveAcross(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	if forwarded(ctx) {
		return n.receiveLocal(ctx, e, lock, wait)
	}
	if len(e.GetPartitions()) == 1 {
		return n.receiveFrom(ctx, e, 0, lock, wait)
	}
	return firstAcross(n.sources(e), wait, func(s source, wait time.Duration) ([]*raftbusv1.ReceivedMessage, bool, error) {
		var msgs []*raftbusv1.ReceivedMessage
		var err error
		switch {
		case s.local:
			msgs, err = n.receiveLocal(ctx, e, lock, wait)
		case s.addr != "":
			msgs, err = n.receiveAt(ctx, s.addr, lock, wait)
		default:
			msgs, err = n.receiveFrom(ctx, e, s.id, lock, wait)
		}
		return msgs, len(msgs) > 0, err
	})
}

// source is where a receive across partitions looks: the partitions this
// node leads (local), a node that leads some of the others (addr), or one
// partition (id) of which this node holds no replica, reached through the
// routing cache and its NOT_LEADER hints (see route).
type source struct {
	local bool
	addr  string
	id    uint32
}

// sources lists where a receive across e's partitions looks: this node
// first, then each other leader once, as this node's replicas know them.
func (n *Node) sources(e *clusterv1.Entity) []source {
	var local bool
	var remote, other []source
	seen := map[string]bool{}
	for _, id := range n.pollOrder(e) {
		r := n.replica(e, id)
		if r == nil {
			other = append(other, source{id: id})
			continue
		}
		if r.p.IsLeader() {
			local = true
			continue
		}
		switch addr, _ := r.p.Leader(); {
		case addr == "" || addr == n.addr:
			// No leader now: asked on its own, it answers why.
			other = append(other, source{id: id})
		case !seen[addr]:
			seen[addr] = true
			remote = append(remote, source{addr: addr})
		}
	}
	var out []source
	if local {
		out = append(out, source{local: true})
	}
	return append(append(out, remote...), other...)
}

// receiveLocal receives from whichever partition of e this node leads has
// messages first, waiting up to wait on all of them at once.
func (n *Node) receiveLocal(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(n.stop)},
		}
		var failed error
		answered := false
		for _, id := range n.pollOrder(e) {
			r := n.replica(e, id)
			if r == nil || !r.p.IsLeader() {
				continue
			}
			// Taken before looking, so that a change while looking wakes
			// the wait below.
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.p.Changes())})
			if !r.ready() {
				failed = busy("partition %s is starting; try again", groupName(e, id))
				continue
			}
			msgs, err := r.p.Receive(ctx, lock, 0)
			switch {
			case err == nil && len(msgs) > 0:
				return msgs, nil
			case err == nil:
				answered = true
			case asAPIError(err).reason == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
				return nil, asAPIError(err)
			default:
				failed = asAPIError(err)
			}
		}
		switch {
		case !answered && failed != nil:
			return nil, failed
		case !answered:
			return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "this node leads no partition of %q", e.GetName())
		case !time.Now().Before(deadline):
			return nil, nil
		}
		switch chosen, _, _ := reflect.Select(cases); chosen {
		case 0:
			return nil, nil
		case 1:
			return nil, ctx.Err()
		case 2:
			return nil, busy("node is shutting down; try another")
		}
	}
}

// receiveAt asks the node at addr to receive from the partitions of the
// lock's entity it leads, waiting up to wait on them all at once.
func (n *Node) receiveAt(ctx context.Context, addr string, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	cc, err := n.peers.get(addr)
	if err != nil {
		return nil, asAPIError(err)
	}
	conn := rpcreach.Wrap(cc)
	fctx := metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
	resp, err := raftbusv1.NewMessagingServiceClient(conn).Receive(fctx, &raftbusv1.ReceiveRequest{
		EntityPath:  lock.GetEntityPath(),
		SubQueue:    lock.GetSubQueue(),
		ReceiveMode: lock.GetReceiveMode(),
		MaxMessages: lock.GetMaxMessages(),
		MaxWait:     durationpb.New(wait),
		ReceiveId:   lock.GetReceiveId(),
	})
	if err != nil {
		return nil, asAPIError(forwardError(err, addr, conn.MaybeSent()))
	}
	return resp.GetMessages(), nil
}
