package cluster

import (
	"context"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Entities are looked up in this node's copy of the metadata, which may
// lag the metadata leader's by a moment: a lookup that finds nothing asks
// the leader before it answers NOT_FOUND (catchUp).

// entity returns the committed definition of name, or NOT_FOUND.
func (n *Node) entity(ctx context.Context, name string) (*clusterv1.Entity, error) {
	var e *clusterv1.Entity
	err := n.catchUp(ctx, func() bool {
		e = n.meta.fsm.Entity(name)
		return e != nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) error {
		_, err := c.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: name})
		if err != nil && apierror.From(err).Reason == raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
			_, err = c.GetTopic(ctx, &raftbusv1.GetTopicRequest{Name: name})
		}
		return err
	}, name)
	return e, err
}

// subscription returns a subscription and its topic, or NOT_FOUND.
func (n *Node) subscription(ctx context.Context, topic, name string) (*clusterv1.Entity, *clusterv1.Subscription, error) {
	var e *clusterv1.Entity
	var sub *clusterv1.Subscription
	err := n.catchUp(ctx, func() bool {
		e = n.meta.fsm.Entity(topic)
		sub = meta.FindSubscription(e, name)
		return sub != nil
	}, func(ctx context.Context, c raftbusv1.AdminServiceClient) error {
		_, err := c.GetSubscription(ctx, &raftbusv1.GetSubscriptionRequest{TopicName: topic, SubscriptionName: name})
		return err
	}, meta.SubscriptionPath(topic, name))
	if err != nil {
		return nil, nil, err
	}
	if e.GetKind() != clusterv1.EntityKind_ENTITY_KIND_TOPIC {
		return nil, nil, apierror.NotFound("%q is not a topic", topic)
	}
	return e, sub, nil
}

// catchUp makes a lookup in the local metadata read-your-writes: when
// found reports false on a node that does not lead the metadata group, it
// asks the leader (which has applied every acknowledged change) with ask,
// and when the leader has it, waits to apply it too. So an entity created
// through one node can be used through any other at once.
func (n *Node) catchUp(ctx context.Context, found func() bool, ask func(context.Context, raftbusv1.AdminServiceClient) error, what string) error {
	if found() {
		return nil
	}
	// Whichever node turns out to lead, it confirms that it does and has
	// applied everything its predecessors committed before it says no: a
	// leader elected a moment ago may not have (this node among them, if
	// it wins an election while asking).
	ctx = routing.Internal(ctx)
	err := n.atMetaLeader(ctx, true, func() error {
		if found() {
			return nil
		}
		return apierror.NotFound("%q does not exist", what)
	}, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		return ask(ctx, raftbusv1.NewAdminServiceClient(conn))
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	for {
		changed := n.meta.fsm.Changes()
		if found() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return apierror.Busy("%q exists but this node has not caught up with it yet", what)
		}
	}
}

// nodeAddrs maps node ids to addresses, as committed.
func (n *Node) nodeAddrs() map[string]string {
	out := make(map[string]string)
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		for _, m := range s.Nodes {
			out[m.NodeId] = m.Address
		}
	})
	return out
}
