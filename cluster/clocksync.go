package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// DefaultMaxClockOffset is how far a node's clock may be from a majority
// of the cluster's before it refuses to lead, as CockroachDB's default
// max offset.
const DefaultMaxClockOffset = 500 * time.Millisecond

const (
	// pingInterval is how often a node pings each other node to measure
	// its clock: one small call per peer per interval.
	pingInterval = time.Second
	// pingTimeout bounds one ping.
	pingTimeout = time.Second
	// clockStaleAfter is how long a measurement counts: a peer not
	// measured for this long is not heard from.
	clockStaleAfter = 5 * pingInterval
	// skewLogInterval spaces the error lines a skewed node repeats.
	skewLogInterval = 10 * time.Second
)

// clockSync is what the node knows of its clock and its peers'.
type clockSync struct {
	src     clock.Source
	monitor *clock.Monitor
	// bounded is the time this node's partition leaders stamp.
	bounded *clock.Bounded

	mu      sync.Mutex
	verdict clock.Verdict
	judged  bool
	// reported is each peer's judgement of its own clock, from its last
	// answer to a ping.
	reported map[string]raftbusv1.ClockState
	// loud is when the last error about this clock, and about each far
	// peer's, was logged (monotonic).
	loud map[string]time.Duration
}

func newClockSync(src clock.Source, maxOffset time.Duration) *clockSync {
	return &clockSync{
		src:      src,
		monitor:  clock.NewMonitor(maxOffset, clockStaleAfter),
		bounded:  clock.NewBounded(src),
		reported: make(map[string]raftbusv1.ClockState),
		loud:     make(map[string]time.Duration),
	}
}

// state is this node's judgement of its own clock.
func (cs *clockSync) state() raftbusv1.ClockState {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if !cs.judged {
		return raftbusv1.ClockState_CLOCK_STATE_UNCONFIRMED
	}
	return clockState(cs.verdict.State)
}

func clockState(s clock.State) raftbusv1.ClockState {
	switch s {
	case clock.Healthy:
		return raftbusv1.ClockState_CLOCK_STATE_HEALTHY
	case clock.Skewed:
		return raftbusv1.ClockState_CLOCK_STATE_SKEWED
	}
	return raftbusv1.ClockState_CLOCK_STATE_UNCONFIRMED
}

// peerState is what a peer last said of its own clock, when it said so
// recently.
func (cs *clockSync) peerState(id string) raftbusv1.ClockState {
	if _, ok := cs.monitor.Latest(id, cs.src.Monotonic()); !ok {
		return raftbusv1.ClockState_CLOCK_STATE_UNSPECIFIED
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.reported[id]
}

// mayLead reports whether leadership may be handed to peer: unless it was
// heard from recently with a clock beyond the maximum offset of this one,
// or saying its own clock is not healthy. A peer not heard from recently
// (just restarted) is given the benefit of the doubt: a node whose clock
// is not trusted stamps nothing, and one that is skewed hands over at
// once.
func (cs *clockSync) mayLead(peer string) bool {
	now := cs.src.Monotonic()
	if _, ok := cs.monitor.Latest(peer, now); !ok {
		return true
	}
	return cs.monitor.Agrees(peer, now) && cs.peerState(peer) == raftbusv1.ClockState_CLOCK_STATE_HEALTHY
}

// runClockSync pings every other member once per pingInterval and judges
// this node's clock after each round; four times as often while the clock
// is not healthy, so that a node coming back (or a cluster restarting)
// serves again soon after a majority of its peers answer.
func (n *Node) runClockSync() {
	defer n.wg.Done()
	timer := time.NewTimer(pingInterval)
	defer timer.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-timer.C:
		}
		n.checkClock()
		next := pingInterval
		if n.clocks.state() != raftbusv1.ClockState_CLOCK_STATE_HEALTHY {
			next = pingInterval / 4
		}
		timer.Reset(next)
	}
}

// checkClock runs one round: it pings every voter of the metadata group,
// judges this node's clock by the answers, lets partition leaders stamp
// time only while the clock is healthy, and hands over every group this
// node leads while it is skewed.
func (n *Node) checkClock() {
	cs := n.clocks
	wall, mono := cs.src.Now(), cs.src.Monotonic()
	var members []string
	var wg sync.WaitGroup
	if f := n.meta.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			members = append(members, string(s.ID))
			if string(s.ID) == n.cfg.NodeID {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.measure(string(s.ID), string(s.Address))
			}()
		}
	}
	wg.Wait()

	v := cs.monitor.Verdict(n.cfg.NodeID, members, cs.src.Monotonic())
	cs.mu.Lock()
	prev, judged := cs.verdict.State, cs.judged
	cs.verdict, cs.judged = v, true
	cs.mu.Unlock()
	if v.State == clock.Healthy {
		cs.bounded.Vouch(wall, mono)
	} else {
		cs.bounded.Distrust(v.String())
	}
	n.logClock(v, prev, judged)
	if v.State == clock.Skewed {
		n.stepDown()
	}
}

// measure pings one peer and records what it says of its clock.
func (n *Node) measure(id, addr string) {
	cs := n.clocks
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	resp, meas, err := n.ping(ctx, addr, identity.Identity{NodeID: id, Incarnation: n.recordedIncarnation(id)})
	if err != nil {
		n.log.Debug("ping", "peer", id, "err", err)
		return
	}
	self := n.self()
	switch {
	case resp.GetNodeId() != id:
		cs.monitor.Forget(id)
		n.log.Warn("the node at a member's address is another node", "member", id, "address", addr, "answered", resp.GetNodeId())
		return
	case resp.GetClusterId() != "" && self.ClusterID != "" && resp.GetClusterId() != self.ClusterID:
		cs.monitor.Forget(id)
		n.logRefusal(id, &identity.Refusal{Kind: identity.ForeignCluster, Message: fmt.Sprintf(
			"member %s at %s answers as a node of cluster %s, not of this cluster %s: its clock is not counted and its Raft traffic is refused; check its data dir and address",
			id, addr, resp.GetClusterId(), self.ClusterID)})
		return
	case resp.GetCallerRemoved():
		n.fail(fmt.Errorf("cluster: %s (node %s says so)", meta.RemovedMessage(self.NodeID), id))
		return
	case resp.GetCallerIncarnation() != "" && resp.GetCallerIncarnation() != self.Incarnation:
		n.fail(fmt.Errorf("cluster: %s (node %s says so)", identity.StaleMessage(self.NodeID, resp.GetCallerIncarnation(), self.Incarnation), id))
		return
	}
	cs.monitor.Record(id, meas)
	cs.mu.Lock()
	cs.reported[id] = resp.GetClockState()
	cs.mu.Unlock()
}

// ping calls NodeService.Ping at addr as this node, meant for the
// incarnation target, and measures the peer's clock from the answer.
func (n *Node) ping(ctx context.Context, addr string, target identity.Identity) (*clusterv1.PingResponse, clock.Measurement, error) {
	conn, err := n.peers.Get(addr)
	if err != nil {
		return nil, clock.Measurement{}, err
	}
	ctx = metadata.NewOutgoingContext(ctx, identity.Outgoing(n.self(), target))
	src := n.clocks.src
	sent, start := src.Now(), src.Monotonic()
	resp, err := clusterv1.NewNodeServiceClient(conn).Ping(ctx, &clusterv1.PingRequest{})
	end := src.Monotonic()
	if err != nil {
		return nil, clock.Measurement{}, err
	}
	meas := clock.Measure(sent, time.Unix(0, resp.GetReceivedUnixNano()), time.Unix(0, resp.GetRepliedUnixNano()), end-start, end)
	return resp, meas, nil
}

// Ping answers a peer's ping: who this node is, what its cluster knows of
// the caller, and its clock.
func (s *nodeService) Ping(ctx context.Context, _ *clusterv1.PingRequest) (*clusterv1.PingResponse, error) {
	n := s.n
	received := n.clocks.src.Now()
	md, _ := metadata.FromIncomingContext(ctx)
	caller, target := identity.Caller(md)
	// A refused caller still gets its answer: what this node's cluster
	// knows of it is how it learns that it must stop.
	n.vet(caller, target)
	self := n.self()
	resp := &clusterv1.PingResponse{
		NodeId:            self.NodeID,
		ClusterId:         self.ClusterID,
		Incarnation:       self.Incarnation,
		CallerIncarnation: n.recordedIncarnation(caller.NodeID),
		CallerRemoved:     n.removedMember(caller.NodeID),
		ReceivedUnixNano:  received.UnixNano(),
		ClockState:        n.clocks.state(),
	}
	resp.RepliedUnixNano = n.clocks.src.Now().UnixNano()
	return resp, nil
}

// logClock says what changed about this node's clock, and keeps saying
// it at error level while the clock is skewed; it also names peers whose
// clocks are far from this healthy one.
func (n *Node) logClock(v clock.Verdict, prev clock.State, judged bool) {
	cs := n.clocks
	now := cs.src.Monotonic()
	loud := func(key string) bool {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		last, ok := cs.loud[key]
		if ok && now-last < skewLogInterval {
			return false
		}
		cs.loud[key] = now
		return true
	}
	changed := !judged || prev != v.State
	switch v.State {
	case clock.Skewed:
		if again := loud("self"); changed || again {
			n.log.Error("CLOCK SKEWED: this node hands over leadership of every Raft group it leads and refuses to lead until its clock is within the maximum offset of a majority of the cluster's; fix its time synchronisation",
				"verdict", v.String())
		}
	case clock.Unconfirmed:
		if changed && judged {
			n.log.Warn("clock unconfirmed: this node stamps no time, so serves no partition it leads, until a majority of the cluster's clocks vouch for its own", "verdict", v.String())
		}
	case clock.Healthy:
		if changed && judged {
			n.log.Info("clock healthy again: this node may lead", "verdict", v.String())
		}
	}
	if v.State == clock.Healthy {
		for _, p := range v.Far {
			if loud("peer/" + p.NodeID) {
				n.log.Error("a peer's clock is beyond the maximum offset: it should refuse to lead", "peer", p.NodeID,
					"offset", p.Offset.Round(time.Millisecond), "max_offset", v.MaxOffset)
			}
		}
	}
}

// stepDown hands over every group this node leads: the metadata group
// and each partition, to the most up-to-date follower in touch.
func (n *Node) stepDown() {
	if n.meta.isLeader() && n.metaTransferring.CompareAndSwap(false, true) {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer n.metaTransferring.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
			defer cancel()
			err := partition.HandOver(ctx, n.meta.raft, n.meta.followers, "", n.raftTimes(partition.DefaultElectionTimeout))
			if err != nil {
				n.log.Warn("hand over the metadata group (clock skewed)", "err", err)
				return
			}
			n.log.Info("handed over the metadata group (clock skewed)")
		}()
	}
	n.mu.RLock()
	var leading []*replica
	for _, r := range n.replicas {
		if r.p.IsLeader() {
			leading = append(leading, r)
		}
	}
	n.mu.RUnlock()
	for _, r := range leading {
		if !r.transferring.CompareAndSwap(false, true) {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer r.transferring.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
			defer cancel()
			if err := r.p.HandOver(ctx, ""); err != nil {
				n.log.Warn("hand over partition (clock skewed)", "group", r.group, "err", err)
				return
			}
			n.log.Info("handed over partition (clock skewed)", "group", r.group)
		}()
	}
}
