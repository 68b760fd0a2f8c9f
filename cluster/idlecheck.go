package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/idle"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The metadata leader deletes entities idle for their auto_delete_on_idle:
// every idleCheckEvery it takes the entities that have the setting, asks
// every member how long each has gone unused there (the node's
// idle.Tracker), and deletes those idle on all of them, and unchanged,
// for long enough. A round in which a member does not answer deletes
// nothing: that member may have served them.
const (
	// defaultIdleCheckEvery spaces the checks: a deletion comes at most
	// this late, against settings of at least five minutes.
	defaultIdleCheckEvery = 30 * time.Second
	// idleCheckTimeout bounds one check.
	idleCheckTimeout = 10 * time.Second
)

// newIdleTracker is the node's tracker of entity use, which forgets the
// paths of no entity in its metadata.
func (n *Node) newIdleTracker() *idle.Tracker {
	return idle.NewTracker(n.cfg.idleClock, func(path string) bool {
		if n.meta == nil {
			return true
		}
		if topic, sub, ok := meta.SplitSubscriptionPath(path); ok {
			return meta.FindSubscription(n.meta.fsm.Entity(topic), sub) != nil
		}
		return n.meta.fsm.Entity(path) != nil
	})
}

// idleInterceptor notes every public call as a use of the entities it
// names, for as long as it runs (a receive's long poll keeps its entity
// in use). Calls from other nodes are not noted: a client's call
// forwarded was noted where it entered, and the nodes' own calls (an
// entity looked up, a forwarder's) are nobody's use.
func (n *Node) idleInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if routing.FromNode(ctx) || strings.HasPrefix(info.FullMethod, "/raftbus.cluster.") || strings.HasPrefix(info.FullMethod, "/raftbus.raft.") {
		return handler(ctx, req)
	}
	defer n.idle.Use(idle.RequestPaths(req)...)()
	return handler(ctx, req)
}

// IdleTimes serves the metadata leader's check.
func (s *nodeService) IdleTimes(_ context.Context, req *clusterv1.IdleTimesRequest) (*clusterv1.IdleTimesResponse, error) {
	out := make([]*durationpb.Duration, len(req.GetPaths()))
	for i, p := range req.GetPaths() {
		out[i] = durationpb.New(s.n.idle.IdleFor(p))
	}
	return &clusterv1.IdleTimesResponse{Idle: out}, nil
}

// runIdleCheck runs the checks while this node leads the metadata group.
func (n *Node) runIdleCheck() {
	n.whileMetaLeader(n.cfg.idleCheckEvery, idleCheckTimeout, func(ctx context.Context) {
		if err := n.checkIdle(ctx); err != nil {
			n.log.Debug("auto-delete idle entities", "err", err)
		}
	})
}

// checkIdle deletes the entities idle for their auto_delete_on_idle.
func (n *Node) checkIdle(ctx context.Context) error {
	// The candidates come from a state holding every acknowledged change:
	// their guards then name each entity as it is.
	if err := n.meta.confirmLeadership(ctx); err != nil {
		return err
	}
	var candidates []idle.Candidate
	var peers []*clusterv1.Node
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		candidates = idle.Candidates(s)
		for _, m := range s.GetNodes() {
			if m.GetNodeId() != n.cfg.NodeID && m.GetMembership() != raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED {
				peers = append(peers, m)
			}
		}
	})
	if len(candidates) == 0 {
		return nil
	}
	paths := make([]string, len(candidates))
	least := make(map[string]time.Duration, len(candidates))
	for i, c := range candidates {
		paths[i] = c.Path
		least[c.Path] = n.idle.IdleFor(c.Path)
	}
	for _, m := range peers {
		var resp *clusterv1.IdleTimesResponse
		err := n.peers.Call(ctx, m.GetAddress(), func(ctx context.Context, conn grpc.ClientConnInterface) error {
			var err error
			resp, err = clusterv1.NewNodeServiceClient(conn).IdleTimes(ctx, &clusterv1.IdleTimesRequest{Paths: paths})
			return err
		})
		if err == nil && len(resp.GetIdle()) != len(paths) {
			err = fmt.Errorf("%d answers for %d paths", len(resp.GetIdle()), len(paths))
		}
		if err != nil {
			return fmt.Errorf("idle times of node %s: %w", m.GetNodeId(), err)
		}
		for i, p := range paths {
			least[p] = min(least[p], resp.GetIdle()[i].AsDuration())
		}
	}
	now := n.cfg.idleClock.Now()
	for _, c := range candidates {
		if !idle.Due(c, least[c.Path], now) {
			continue
		}
		cmd := &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteEntity{DeleteEntity: &clusterv1.DeleteEntity{Name: c.Path, Guard: c.Guard}}}
		if c.Subscription != "" {
			cmd = &clusterv1.MetaCommand{Body: &clusterv1.MetaCommand_DeleteSubscription{DeleteSubscription: &clusterv1.DeleteSubscription{
				TopicName: c.Topic, SubscriptionName: c.Subscription, Guard: c.Guard,
			}}}
		}
		if _, err := n.meta.propose(ctx, cmd); err != nil {
			if apierror.From(err).Reason == raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
				continue // deleted, re-created or changed meanwhile
			}
			return fmt.Errorf("delete %s: %w", c.Path, err)
		}
		n.log.Info("deleted an idle entity", "entity", c.Path, "auto_delete_on_idle", c.After, "idle", least[c.Path])
	}
	return nil
}
