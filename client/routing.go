package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/metadata"

	"github.com/raftbus/raftbus/internal/rpcreach"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// routingTable caches, per entity path, the address of each partition's
// leader, from AdminService.GetRoutingTable. Entries are corrected by
// NOT_LEADER hints and dropped when a leader cannot be reached.
type routingTable struct {
	c  *Client
	mu sync.Mutex
	// entities maps an entity path to its route. A route is never changed
	// once cached, only replaced.
	entities map[string]*entityRoute
	// lookups joins the concurrent requests for one entity's route.
	lookups singleflight.Group
}

// entityRoute is what the client knows of where an entity is served.
type entityRoute struct {
	// leaders is the leader address of each partition ("" when unknown).
	leaders []string
	// duplicateDetection: the entity detects duplicates (fixed when it is
	// created), so a send whose messages all have a MessageId may be
	// repeated after an unknown outcome.
	duplicateDetection bool
}

func newRoutingTable(c *Client) *routingTable {
	return &routingTable{c: c, entities: make(map[string]*entityRoute)}
}

// routeTimeout bounds one routing-table request, made on behalf of every
// caller that missed the cache meanwhile.
const routeTimeout = 10 * time.Second

// lookup returns the route of path, asking the cluster when it is not
// cached. Callers that miss the cache at once share one request: a node
// asks every replica of every partition to answer it, and a client that
// starts many senders and receivers together would otherwise ask as
// many times.
func (r *routingTable) lookup(ctx context.Context, path string) (*entityRoute, error) {
	r.mu.Lock()
	cached, ok := r.entities[path]
	r.mu.Unlock()
	if ok {
		return cached, nil
	}
	// The shared request must not end with one caller's context.
	ch := r.lookups.DoChan(path, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), routeTimeout)
		defer cancel()
		return r.fetch(ctx, path)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*entityRoute), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch asks the cluster for the route of path and caches it.
func (r *routingTable) fetch(ctx context.Context, path string) (*entityRoute, error) {
	resp, err := r.c.adminOnce().GetRoutingTable(ctx, &raftbusv1.GetRoutingTableRequest{EntityPath: path})
	if err != nil {
		return nil, err
	}
	if len(resp.GetEntities()) != 1 {
		return nil, &Error{Code: CodeNotFound, Message: "no route for " + path}
	}
	route := resp.GetEntities()[0]
	rt := &entityRoute{leaders: make([]string, route.GetPartitionCount()), duplicateDetection: route.GetRequiresDuplicateDetection()}
	for _, p := range route.GetPartitions() {
		if p.GetPartitionId() < uint32(len(rt.leaders)) {
			rt.leaders[p.GetPartitionId()] = p.GetLeaderAddress()
		}
	}
	r.mu.Lock()
	r.entities[path] = rt
	r.mu.Unlock()
	return rt, nil
}

// route is path's route, asking the cluster (with retries) when it is not
// cached.
func (r *routingTable) route(ctx context.Context, path string) (*entityRoute, error) {
	var rt *entityRoute
	err := r.c.retry(ctx, true, func(ctx context.Context, attempt int) error {
		var err error
		rt, err = r.lookup(ctx, path)
		return err
	})
	return rt, err
}

// partitions is path's partition count, asking the cluster (with
// retries) when it is not cached.
func (r *routingTable) partitions(ctx context.Context, path string) (uint32, error) {
	rt, err := r.route(ctx, path)
	if err != nil {
		return 0, err
	}
	return uint32(len(rt.leaders)), nil
}

func (r *routingTable) setLeader(path string, id uint32, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.entities[path]; ok && id < uint32(len(rt.leaders)) {
		next := &entityRoute{leaders: append([]string(nil), rt.leaders...), duplicateDetection: rt.duplicateDetection}
		next.leaders[id] = addr
		r.entities[path] = next
	}
}

func (r *routingTable) forget(path string) {
	r.mu.Lock()
	delete(r.entities, path)
	r.mu.Unlock()
}

// routeKey is the path the routing table knows an entity by: a
// subscription lives in its topic's partitions.
func routeKey(path string) string {
	for i := 0; i+len("/subscriptions/") <= len(path); i++ {
		if path[i:i+len("/subscriptions/")] == "/subscriptions/" {
			return path[:i]
		}
	}
	return path
}

// onPartition runs call at the leader of partition id of path, following
// NOT_LEADER hints and refreshing the table after other failures, with
// the retry policy of c.retry.
func (c *Client) onPartition(ctx context.Context, path string, id uint32, unknownIsSafe bool,
	call func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error) error {
	return c.onPartitionAfter(ctx, nil, path, id, unknownIsSafe, call)
}

// onPartitionAfter is onPartition for a call whose first attempt was made
// elsewhere and failed with first (see Client.retryAfter).
func (c *Client) onPartitionAfter(ctx context.Context, first *Error, path string, id uint32, unknownIsSafe bool,
	call func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error) error {
	key := routeKey(path)
	if first != nil {
		c.noteRouting(key, id, first)
	}
	return c.retryAfter(ctx, first, unknownIsSafe, func(ctx context.Context, attempt int) error {
		rt, err := c.routes.lookup(ctx, key)
		if err != nil {
			return err
		}
		addr := ""
		if id < uint32(len(rt.leaders)) {
			addr = rt.leaders[id]
		}
		callCtx := ctx
		if c.avoided(addr) {
			addr = "" // a node that can reach it forwards the call
		}
		if addr == "" {
			// No leader known: let any node forward the call.
			addr = c.seed()
		} else {
			callCtx = metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
		}
		cc, err := c.conn(addr)
		if err != nil {
			return err
		}
		conn := rpcreach.Wrap(cc)
		err = callError(call(callCtx, raftbusv1.NewMessagingServiceClient(conn)), conn, addr)
		c.noteRouting(key, id, err)
		c.noteReach(addr, err)
		return err
	})
}

// noteRouting updates the routing table from a call's failure: the leader
// a NOT_LEADER names, or, when the table may be stale, nothing.
func (c *Client) noteRouting(key string, id uint32, err error) {
	var e *Error
	if errors.As(err, &e) {
		switch {
		case e.Code == CodeNotLeader && e.leaderAddr != "":
			c.routes.setLeader(key, id, e.leaderAddr)
		case e.Code == CodeNotLeader, e.Code == CodeServerBusy, e.Code == CodeOutcomeUnknown, e.Code == CodeNotFound:
			c.routes.forget(key)
		}
	}
}

// leaderOf is the address of the leader of partition id of path as the
// routing table knows it, "" when unknown.
func (c *Client) leaderOf(ctx context.Context, path string, id uint32) (string, error) {
	rt, err := c.routes.route(ctx, routeKey(path))
	if err != nil {
		return "", err
	}
	if id < uint32(len(rt.leaders)) {
		return rt.leaders[id], nil
	}
	return "", nil
}

// onNode makes one call at addr, a partition leader, which answers
// NOT_LEADER for what it does not lead instead of forwarding it; "" sends
// it to any node, which forwards. No retries: a call carrying the work of
// several callers leaves retrying to each of them (see coalescer). It
// returns the address it called.
func (c *Client) onNode(ctx context.Context, addr string, call func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error) (string, error) {
	if c.avoided(addr) {
		addr = ""
	}
	if addr == "" {
		addr = c.seed()
	} else {
		ctx = metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
	}
	cc, err := c.conn(addr)
	if err != nil {
		return addr, err
	}
	conn := rpcreach.Wrap(cc)
	err = callError(call(ctx, raftbusv1.NewMessagingServiceClient(conn)), conn, addr)
	c.noteReach(addr, err)
	return addr, err
}

// onAnyNode runs a call that spans partitions (a receive or peek across
// all of them) on any node, which forwards to the leaders.
func (c *Client) onAnyNode(ctx context.Context, unknownIsSafe bool,
	call func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error) error {
	return c.retry(ctx, unknownIsSafe, func(ctx context.Context, attempt int) error {
		addr := c.seed()
		cc, err := c.conn(addr)
		if err != nil {
			return err
		}
		conn := rpcreach.Wrap(cc)
		return callError(call(ctx, raftbusv1.NewMessagingServiceClient(conn)), conn, addr)
	})
}

// unreachableFor is how long the client sends a leader's calls through
// another node after it could not reach that leader.
const unreachableFor = 5 * time.Second

// noteReach remembers addr as unreachable when err says a call never got
// to it: a leader that the cluster reaches but this client does not (its
// advertised address does not resolve here, as in a container network
// seen from the host, or a network cut between the two) is then served
// through another node, which forwards.
func (c *Client) noteReach(addr string, err error) {
	var e *Error
	if addr == "" || !errors.As(err, &e) || !e.unreached {
		return
	}
	c.mu.Lock()
	if c.unreachable == nil {
		c.unreachable = make(map[string]time.Time)
	}
	c.unreachable[addr] = time.Now().Add(unreachableFor)
	c.mu.Unlock()
}

// avoided reports whether addr was found unreachable a moment ago.
func (c *Client) avoided(addr string) bool {
	if addr == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.unreachable[addr]
	if ok && time.Now().After(until) {
		delete(c.unreachable, addr)
		return false
	}
	return ok
}
