package routing

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/internal/rpcreach"
)

// Peers are this node's client connections to other nodes, for
// forwarding, one per address.
type Peers struct {
	dial  []grpc.DialOption
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewPeers dials each peer, when first asked for it, with opts.
func NewPeers(opts ...grpc.DialOption) *Peers {
	return &Peers{dial: opts, conns: make(map[string]*grpc.ClientConn)}
}

// Get is the connection to the node at addr.
func (p *Peers) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.dial...)
	if err != nil {
		return nil, apierror.Busy("connect to %s: %v", addr, err)
	}
	p.conns[addr] = c
	return c, nil
}

// Replace makes c the connection to addr, closing the one it replaces
// (tests reach a node through a proxy that way).
func (p *Peers) Replace(addr string, c *grpc.ClientConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.conns[addr]; old != nil {
		old.Close()
	}
	p.conns[addr] = c
}

// Close closes every connection.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = map[string]*grpc.ClientConn{}
}

// Call calls the node at addr, asking it to serve the call itself (see
// NoForward). A failure of the transport says whether the call may have
// reached the node (see ForwardError).
func (p *Peers) Call(ctx context.Context, addr string, call func(ctx context.Context, conn grpc.ClientConnInterface) error) error {
	cc, err := p.Get(addr)
	if err != nil {
		return err
	}
	conn := rpcreach.Wrap(cc)
	if err := call(NoForward(ctx), conn); err != nil {
		return ForwardError(err, addr, conn.MaybeSent())
	}
	return nil
}

// Leaders remembers the last known leader address of partitions this
// node does not hold, learned from NOT_LEADER hints, by Raft group.
type Leaders struct {
	mu      sync.Mutex
	leaders map[string]string
}

// NewLeaders knows no leader yet.
func NewLeaders() *Leaders { return &Leaders{leaders: make(map[string]string)} }

// Get is the address of group's last known leader, or "".
func (c *Leaders) Get(group string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaders[group]
}

// Set records group's leader; "" forgets it.
func (c *Leaders) Set(group, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if addr == "" {
		delete(c.leaders, group)
	} else {
		c.leaders[group] = addr
	}
}
