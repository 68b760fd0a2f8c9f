package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/cluster/meta"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// identityInterval spaces the retries of registering this node's
// incarnation with the metadata leader.
const identityInterval = time.Second

// refusalLogInterval spaces the log lines about one peer refused for one
// reason: loud, not flooding (Raft retries many times a second).
const refusalLogInterval = 10 * time.Second

// nodeIdentity is this node's data dir record, completed with the cluster
// id once the node learns it.
type nodeIdentity struct {
	dir string

	mu  sync.Mutex
	rec identity.Record
	// logged is when each refusal was last logged, by peer and kind.
	logged map[string]time.Time
}

func (ni *nodeIdentity) record() identity.Record {
	ni.mu.Lock()
	defer ni.mu.Unlock()
	return ni.rec
}

// self is this node's identity as it says it to its peers.
func (n *Node) self() identity.Identity {
	rec := n.ident.record()
	return identity.Identity{ClusterID: rec.ClusterID, NodeID: rec.NodeID, Incarnation: rec.Incarnation}
}

// recordedIncarnation is the incarnation the committed membership records
// for a node id, "" when none.
func (n *Node) recordedIncarnation(id string) string {
	if m := (*n.members.Load())[id]; m != nil {
		return m.GetIncarnation()
	}
	return ""
}

// removedMember reports whether the committed membership removed node id.
func (n *Node) removedMember(id string) bool {
	m := (*n.members.Load())[id]
	return m.GetMembership() == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED
}

// outgoingIdentity is the metadata of a Raft RPC to server target.
func (n *Node) outgoingIdentity(target raft.ServerID) metadata.MD {
	return identity.Outgoing(n.self(), identity.Identity{NodeID: string(target), Incarnation: n.recordedIncarnation(string(target))})
}

// admit vets an incoming Raft RPC by the identity of its caller.
func (n *Node) admit(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	caller, target := identity.Caller(md)
	if r := n.vet(caller, target); r != nil {
		return r
	}
	return nil
}

// vet checks a call from caller meant for the incarnation target. A
// refusal is logged (the operator must act on it); one that says this
// node's own data dir is not the one its cluster knows stops the node.
func (n *Node) vet(caller, target identity.Identity) *identity.Refusal {
	r := identity.Check(n.self(), caller, n.recordedIncarnation(caller.NodeID), target)
	if r == nil {
		return nil
	}
	if r.Kind == identity.StaleSelf {
		n.fail(errors.New(r.Message))
		return r
	}
	n.logRefusal(caller.NodeID, r)
	return r
}

func (n *Node) logRefusal(peer string, r *identity.Refusal) {
	key := fmt.Sprintf("%s/%d", peer, r.Kind)
	n.ident.mu.Lock()
	if n.ident.logged == nil {
		n.ident.logged = make(map[string]time.Time)
	}
	last, ok := n.ident.logged[key]
	due := !ok || time.Since(last) >= refusalLogInterval
	if due {
		n.ident.logged[key] = time.Now()
	}
	n.ident.mu.Unlock()
	if due {
		n.log.Error(r.Message, "peer", peer)
	}
}

// runIdentity keeps this node's view of the membership current, for
// vetting Raft RPCs, and this node's record in the membership complete.
func (n *Node) runIdentity() {
	defer n.wg.Done()
	tick := time.NewTicker(identityInterval)
	defer tick.Stop()
	for {
		changed := n.meta.fsm.Changes()
		n.syncIdentity()
		select {
		case <-n.stop:
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// syncIdentity takes in the committed membership and cluster id: it saves
// the cluster id in node.json once known, stops the node when the
// membership knows its id by another incarnation, and registers this
// node's incarnation when the membership has none for it yet.
func (n *Node) syncIdentity() {
	var clusterID string
	members := make(map[string]*clusterv1.Node)
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		clusterID = s.ClusterId
		for _, m := range s.Nodes {
			members[m.NodeId] = proto.Clone(m).(*clusterv1.Node)
		}
	})
	n.members.Store(&members)

	rec := n.ident.record()
	switch {
	case clusterID == "":
	case rec.ClusterID == "":
		rec.ClusterID = clusterID
		if err := identity.Save(n.cfg.DataDir, rec); err != nil {
			n.log.Error("save the cluster id in node.json", "err", err)
			return
		}
		n.ident.mu.Lock()
		n.ident.rec.ClusterID = clusterID
		n.ident.mu.Unlock()
	case rec.ClusterID != clusterID:
		n.fail(fmt.Errorf("cluster: node.json in %s names cluster %s, but the metadata in it belongs to cluster %s: this data dir was put together from two clusters; restore it whole", n.cfg.DataDir, rec.ClusterID, clusterID))
		return
	}

	me := members[rec.NodeID]
	switch {
	case me == nil:
		// Not a member yet: a joining node, or a bootstrapped one before
		// the leader records the voters.
	case me.GetIncarnation() != "" && me.GetIncarnation() != rec.Incarnation:
		n.fail(errors.New(identity.StaleMessage(rec.NodeID, me.GetIncarnation(), rec.Incarnation)))
	case me.GetIncarnation() == "":
		n.register()
	}
}

// register records this node's incarnation in the membership (for a node
// that formed the cluster from a peer list, or whose data dir predates
// incarnations): it joins again, which the metadata leader takes as a
// no-op but for the incarnation.
func (n *Node) register() {
	ctx, cancel := context.WithTimeout(context.Background(), identityInterval)
	defer cancel()
	rec := n.ident.record()
	req := &clusterv1.JoinRequest{NodeId: rec.NodeID, Address: n.addr, Incarnation: rec.Incarnation, ClusterId: rec.ClusterID}
	var err error
	if n.meta.isLeader() {
		err = n.meta.addMember(ctx, req)
	} else if addr := n.meta.leaderAddr(); addr != "" {
		conn, cerr := n.peers.Get(addr)
		if cerr != nil {
			err = cerr
		} else {
			_, err = clusterv1.NewNodeServiceClient(conn).Join(ctx, req)
		}
	}
	if err == nil {
		return
	}
	if e := apierror.From(err); e.Reason == raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		n.fail(fmt.Errorf("cluster: the metadata leader refused this node's incarnation: %s", e.Message))
		return
	}
	n.log.Debug("record this node's incarnation", "err", err)
}

// vetAgainstPeers asks the nodes named by the peer list or the join
// address who they are before this node takes part in anything. It
// refuses to start a node whose id they know by another incarnation (its
// data dir was wiped: it must not bootstrap, vote or join under that id),
// that was removed, or that belongs to another cluster. Nodes that do not
// answer say nothing; a cluster being formed answers with no cluster id
// yet. It returns the address of a peer that answered as a member of a
// formed cluster: a node with a new data dir joins through it rather than
// bootstrapping from the peer list (it replaces a machine, or was added
// to the list later).
func (n *Node) vetAgainstPeers() (formed string, err error) {
	var addrs []string
	for id, addr := range n.cfg.Peers {
		if id != n.cfg.NodeID && addr != n.addr {
			addrs = append(addrs, addr)
		}
	}
	if n.cfg.Join != "" {
		addrs = append(addrs, n.cfg.Join)
	}
	type answer struct {
		addr string
		resp *clusterv1.PingResponse
	}
	answers := make(chan answer, len(addrs))
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
			defer cancel()
			resp, _, err := n.ping(ctx, addr, identity.Identity{})
			if err == nil {
				answers <- answer{addr, resp}
			}
		}()
	}
	wg.Wait()
	close(answers)
	rec := n.ident.record()
	for a := range answers {
		if c := a.resp.GetClusterId(); c != "" && rec.ClusterID != "" && c != rec.ClusterID {
			return "", fmt.Errorf("cluster: this data dir belongs to cluster %s, but node %s at %s belongs to cluster %s: a node takes part only in its own cluster; check --peers and --join, or start with an empty data dir to join that cluster under a new id",
				rec.ClusterID, a.resp.GetNodeId(), a.addr, c)
		}
		if a.resp.GetCallerRemoved() {
			return "", fmt.Errorf("cluster: %s (node %s at %s says so)", meta.RemovedMessage(rec.NodeID), a.resp.GetNodeId(), a.addr)
		}
		if known := a.resp.GetCallerIncarnation(); known != "" && known != rec.Incarnation {
			return "", fmt.Errorf("cluster: %s (node %s at %s says so)", identity.StaleMessage(rec.NodeID, known, rec.Incarnation), a.resp.GetNodeId(), a.addr)
		}
		if a.resp.GetClusterId() != "" && formed == "" {
			formed = a.addr
		}
	}
	return formed, nil
}
