package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/internal/rpcreach"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// DefaultAddress is where a broker started without flags listens.
const DefaultAddress = "127.0.0.1:7400"

// maxGRPCMessage is the largest gRPC message either side accepts (the
// server's limit): a batch of the largest messages fits.
const maxGRPCMessage = 110 << 20

// ClientOptions configure a Client. The zero value (or nil) connects
// without TLS and retries with the defaults of RetryOptions.
type ClientOptions struct {
	// TLSConfig enables TLS with this configuration. Nil: plaintext.
	TLSConfig *tls.Config
	// RetryOptions bound the retries of retryable failures.
	RetryOptions RetryOptions
	// DialOptions are added to the gRPC dial options of every connection.
	DialOptions []grpc.DialOption
	// InProcess are connections to nodes in this process, by the node's
	// address, used instead of dialling those addresses: a node's own
	// front doors reach it so (cluster.Node.InProcess). The client does
	// not close them.
	InProcess map[string]grpc.ClientConnInterface

	// credential signs the tokens of a client made from a connection
	// string (NewClientFromConnectionString).
	credential *sasCredential
}

// Client is a connection to a raftbus cluster. It is safe for concurrent
// use; create Senders and Receivers from it and Close it when done.
type Client struct {
	seeds  []string
	opts   ClientOptions
	routes *routingTable
	next   atomic.Uint32 // round robin over seeds and spreading sends
	// settles gathers concurrent settlements of one partition, from all
	// receivers, into Settle requests.
	settles *coalescer[settleKey, *raftbusv1.Settlement, struct{}]

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // dialled, by address
	closed bool
	// unreachable are leaders this client could not reach, until when
	// their calls go through other nodes (see noteReach).
	unreachable map[string]time.Time
}

// New connects to the cluster whose nodes (some of them) are at addrs
// (host:port). Connections are made lazily, so New fails only on bad
// arguments.
func New(addrs []string, options *ClientOptions) (*Client, error) {
	if len(addrs) == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "no server address given"}
	}
	c := &Client{seeds: append([]string(nil), addrs...), conns: make(map[string]*grpc.ClientConn)}
	if options != nil {
		c.opts = *options
	}
	c.opts.RetryOptions = c.opts.RetryOptions.withDefaults()
	c.routes = newRoutingTable(c)
	c.settles = newCoalescer(maxSettlements, maxSettleBytes, coalescedRequests, c.settleCoalesced)
	return c, nil
}

// Close closes every connection. Senders and Receivers of the client stop
// working.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for addr, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to %s: %w", addr, err))
		}
	}
	c.conns = map[string]*grpc.ClientConn{}
	return errors.Join(errs...)
}

var errClosed = &Error{Code: CodeInvalidArgument, Message: "the client is closed"}

func (c *Client) conn(addr string) (grpc.ClientConnInterface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if conn := c.opts.InProcess[addr]; conn != nil {
		return conn, nil
	}
	if conn := c.conns[addr]; conn != nil {
		return conn, nil
	}
	creds := insecure.NewCredentials()
	if c.opts.TLSConfig != nil {
		creds = credentials.NewTLS(c.opts.TLSConfig)
	}
	dial := append(raftbusv1.DialOptions(),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage), grpc.MaxCallSendMsgSize(maxGRPCMessage)))
	dial = append(dial, c.opts.DialOptions...)
	if c.opts.credential != nil {
		dial = append(dial, grpc.WithPerRPCCredentials(c.opts.credential))
	}
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("connect to %s: %v", addr, err)}
	}
	c.conns[addr] = conn
	return conn, nil
}

// seed picks the next of the configured addresses, for calls any node can
// serve.
func (c *Client) seed() string {
	return c.seeds[int(c.next.Add(1))%len(c.seeds)]
}

// AdminConn is a connection for raftbusv1.NewAdminServiceClient whose calls
// go to any node of the cluster, retry what is safe to retry and fail with
// *Error. Package client/admin builds on it.
func (c *Client) AdminConn() grpc.ClientConnInterface { return anyNodeConn{c} }

// anyNodeConn sends each call to a node of the cluster (forwarding
// allowed). Reads are retried on any retryable failure; changes only when
// they did not happen (NOT_LEADER, SERVER_BUSY, a node that could not be
// reached).
type anyNodeConn struct{ c *Client }

var _ grpc.ClientConnInterface = onceConn{}

func (a anyNodeConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	safe := isReadMethod(method)
	return a.c.retry(ctx, safe, func(ctx context.Context, attempt int) error {
		addr := a.c.seed()
		cc, err := a.c.conn(addr)
		if err != nil {
			return err
		}
		conn := rpcreach.Wrap(cc)
		return callError(conn.Invoke(ctx, method, args, reply, opts...), conn, addr)
	})
}

func (a anyNodeConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	conn, err := a.c.conn(a.c.seed())
	if err != nil {
		return nil, err
	}
	s, err := conn.NewStream(ctx, desc, method, opts...)
	return s, asError(err)
}

// isReadMethod tells the admin calls that change nothing.
func isReadMethod(method string) bool {
	for i := len(method) - 1; i >= 0; i-- {
		if method[i] == '/' {
			name := method[i+1:]
			return len(name) > 3 && (name[:3] == "Get" || name[:4] == "List")
		}
	}
	return false
}

// adminOnce is a client of the admin service that makes one attempt per
// call, at the next seed: for calls made inside another call's retry
// loop, which must not multiply the retries.
func (c *Client) adminOnce() raftbusv1.AdminServiceClient {
	return raftbusv1.NewAdminServiceClient(onceConn{anyNodeConn{c}})
}

type onceConn struct{ anyNodeConn }

func (o onceConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	addr := o.c.seed()
	cc, err := o.c.conn(addr)
	if err != nil {
		return err
	}
	conn := rpcreach.Wrap(cc)
	return callError(conn.Invoke(ctx, method, args, reply, opts...), conn, addr)
}
