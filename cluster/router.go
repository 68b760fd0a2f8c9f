package cluster

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// newPeers are the node's connections to its peers, which take messages
// as large as its own server does.
func newPeers(creds credentials.TransportCredentials) *routing.Peers {
	return routing.NewPeers(append(raftbusv1.DialOptions(),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)))...)
}

// target is where one partition's request is served.
type target struct {
	local *replica // set when this node leads the partition
	addrs []string // otherwise the nodes to try, best first
	group string   // and the partition's group name
}

// locate finds who serves partition id of e: this node when it leads, else
// the leader it knows of, then the other replicas.
func (n *Node) locate(ctx context.Context, e *clusterv1.Entity, id uint32) (target, error) {
	if id >= uint32(len(e.GetPartitions())) {
		return target{}, apierror.Invalid("entity %q has %d partitions; there is no partition %d", e.GetName(), len(e.GetPartitions()), id)
	}
	r := n.replica(e, id)
	if r == nil {
		// A partition quiet here opens for the request (see quiesce.go).
		r = n.wakeToServe(ctx, groupName(e, id))
	}
	if r != nil && r.p.IsLeader() {
		if !r.ready() {
			return target{}, apierror.Busy("partition %s is starting; try again", r.group)
		}
		return target{local: r}, nil
	}
	group := groupName(e, id)
	if routing.Forwarded(ctx) {
		if r != nil {
			return target{}, apierror.From(r.p.NotLeader())
		}
		return target{}, apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "this node holds no replica of partition %s", group)
	}
	var addrs []string
	seen := map[string]bool{n.addr: true}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	if r != nil {
		addr, _ := r.p.Leader()
		add(addr)
	}
	add(n.leaders.Get(group))
	nodes := n.nodeAddrs()
	for _, nid := range e.GetPartitions()[id].GetNodeIds() {
		add(nodes[nid])
	}
	if len(addrs) == 0 {
		return target{}, apierror.Busy("partition %s has no reachable leader", group)
	}
	return target{addrs: addrs, group: group}, nil
}

// route serves a request for one partition: locally when this node leads
// it, else at the leader (see routing.Forward).
func (n *Node) route(ctx context.Context, e *clusterv1.Entity, id uint32, rep routing.Repeat,
	local func(r *replica) error,
	remote func(ctx context.Context, conn grpc.ClientConnInterface) error,
) error {
	t, err := n.locate(ctx, e, id)
	if err != nil {
		return err
	}
	if t.local != nil {
		if err := local(t.local); err != nil {
			return apierror.From(err)
		}
		return nil
	}
	return routing.Forward(ctx, n.peers, n.leaders, t.group, t.addrs, rep, remote)
}
