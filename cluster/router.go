package cluster

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/internal/rpcreach"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// maxRouteAttempts bounds how many nodes one request is tried at: the
// cached or hinted leader, and the replicas after it when a node is down.
const maxRouteAttempts = 4

// peerConns are this node's client connections to other nodes, for
// forwarding, one per address.
type peerConns struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newPeerConns() *peerConns { return &peerConns{conns: make(map[string]*grpc.ClientConn)} }

func (pc *peerConns) get(addr string) (*grpc.ClientConn, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if c, ok := pc.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(raftbusv1.DialConnectParams()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	)
	if err != nil {
		return nil, apierror.Busy("connect to %s: %v", addr, err)
	}
	pc.conns[addr] = c
	return c, nil
}

func (pc *peerConns) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, c := range pc.conns {
		c.Close()
	}
	pc.conns = map[string]*grpc.ClientConn{}
}

// leaderCache remembers the last known leader address of partitions this
// node does not hold, learned from NOT_LEADER hints.
type leaderCache struct {
	mu      sync.Mutex
	leaders map[string]string
}

func newLeaderCache() *leaderCache { return &leaderCache{leaders: make(map[string]string)} }

func (c *leaderCache) get(group string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaders[group]
}

func (c *leaderCache) set(group, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if addr == "" {
		delete(c.leaders, group)
	} else {
		c.leaders[group] = addr
	}
}

// roundRobin spreads sends without a partition key and the starting
// partition of receives.
type roundRobin struct{ next atomic.Uint32 }

func (r *roundRobin) pick(n uint32) uint32 { return r.next.Add(1) % n }

// target is where one partition's request is served.
type target struct {
	local *replica // set when this node leads the partition
	addrs []string // otherwise the nodes to try, best first
}

// locate finds who serves partition id of e: this node when it leads, else
// the leader it knows of, then the other replicas.
func (n *Node) locate(ctx context.Context, e *clusterv1.Entity, id uint32) (target, error) {
	if id >= uint32(len(e.GetPartitions())) {
		return target{}, apierror.Invalid("entity %q has %d partitions; there is no partition %d", e.GetName(), len(e.GetPartitions()), id)
	}
	group := groupName(e, id)
	r := n.replica(e, id)
	if r != nil && r.p.IsLeader() {
		if !r.ready() {
			return target{}, apierror.Busy("partition %s is starting; try again", group)
		}
		return target{local: r}, nil
	}
	if forwarded(ctx) {
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
	add(n.routing.get(group))
	nodes := n.nodeAddrs()
	for _, nid := range e.GetPartitions()[id].GetNodeIds() {
		add(nodes[nid])
	}
	if len(addrs) == 0 {
		return target{}, apierror.Busy("partition %s has no reachable leader", group)
	}
	return target{addrs: addrs}, nil
}

// repeat says what route may do once a forwarded call's outcome is
// unknown (the connection to the leader broke after the request left, or
// the leader lost leadership while replicating it): whether the request
// may be sent again.
type repeat int

const (
	// once: a change that must not be applied twice (a send without
	// duplicate detection, accepting a session). An unknown outcome goes
	// to the caller, who decides.
	once repeat = iota
	// idempotent: a read, or a change whose repeat changes nothing more
	// than the first (a receive with its receive id, cancelling scheduled
	// messages, a send that duplicate detection makes harmless, a change
	// by lock token, whose repeat finds the lock gone if the first took
	// effect). Whatever a repeat then fails with, the caller is told the
	// truth: the outcome is unknown.
	idempotent
)

// route serves a request for one partition: locally when this node leads
// it, else at the leader, following NOT_LEADER hints and skipping nodes
// that are down, at most maxRouteAttempts times. A request is sent again
// only when it certainly did not take effect (the node could not be
// reached or said it did not lead), or when rep says a repeat is safe.
func route[Resp any](ctx context.Context, n *Node, e *clusterv1.Entity, id uint32, rep repeat,
	local func(r *replica) (Resp, error),
	remote func(ctx context.Context, conn grpc.ClientConnInterface) (Resp, error),
) (Resp, error) {
	var zero Resp
	t, err := n.locate(ctx, e, id)
	if err != nil {
		return zero, err
	}
	if t.local != nil {
		resp, err := local(t.local)
		if err != nil {
			return zero, apierror.From(err)
		}
		return resp, nil
	}
	group := groupName(e, id)
	fctx := noForward(ctx)
	var lastErr, unknown *apierror.Error
	queue := t.addrs
	for attempt := 0; attempt < maxRouteAttempts && len(queue) > 0; attempt++ {
		addr := queue[0]
		queue = queue[1:]
		cc, err := n.peers.get(addr)
		if err == nil {
			conn := rpcreach.Wrap(cc)
			var resp Resp
			resp, err = remote(fctx, conn)
			if err == nil {
				n.routing.set(group, addr)
				return resp, nil
			}
			err = forwardError(err, addr, conn.MaybeSent())
		}
		lastErr = apierror.From(err)
		switch lastErr.Reason {
		case raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER:
			if h := lastErr.Leader.GetAddress(); h != "" && h != addr {
				n.routing.set(group, h)
				queue = append([]string{h}, queue...)
			}
		case raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY:
			// The node is down or has no leader: nothing was done; try
			// another replica.
		case raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
			unknown = lastErr
			if rep == once || ctx.Err() != nil {
				return zero, lastErr
			}
			// Safe to repeat: ask the same node again first (the
			// connection may just have broken), then the others.
			queue = append([]string{addr}, queue...)
		default:
			if unknown != nil {
				// An earlier attempt may have taken effect: a repeated
				// settlement that finds its lock gone most likely found it
				// gone because the first settled it, and no failure of a
				// repeat says that nothing happened.
				return zero, unknown
			}
			return zero, lastErr
		}
	}
	n.routing.set(group, "")
	if unknown != nil {
		// An earlier attempt may have taken effect.
		return zero, unknown
	}
	if lastErr == nil {
		lastErr = apierror.Busy("partition %s has no reachable leader", group)
	}
	return zero, lastErr
}

// forwardError classifies a failed forwarded call that the node called
// did not answer itself (a gRPC status without ErrorInfo): a call that
// never reached it did nothing, one that may have is of unknown outcome.
func forwardError(err error, addr string, maybeSent bool) error {
	st, ok := status.FromError(err)
	if !ok || apierror.HasInfo(st) || st.Code() != codes.Unavailable {
		return err
	}
	if !maybeSent {
		return apierror.Busy("node %s is unreachable: %s", addr, st.Message())
	}
	return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
		"the connection to node %s broke after the request was sent (%s); it may or may not have taken effect", addr, st.Message())
}

// noForward marks a call to another node as one it must serve itself,
// answering NOT_LEADER for what it does not lead.
func noForward(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
}
