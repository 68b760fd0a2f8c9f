package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/cluster/routing"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// testCluster is a set of in-process nodes on loopback.
type testCluster struct {
	t     testing.TB
	dir   string
	nodes []*Node // nil where stopped
	// clocks are the nodes' clocks, kept across restarts; a test skews a
	// node with SetOffset.
	clocks []*clock.System
	// tweak, when set, changes each node's configuration before it starts.
	tweak func(cfg *Config)
}

// newTestCluster starts n nodes: the first forms the cluster, the others
// join it.
func newTestCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, nil)
}

// newTestClusterWith is newTestCluster with tweak applied to each node's
// configuration.
func newTestClusterWith(t testing.TB, n int, tweak func(cfg *Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dir: t.TempDir(), tweak: tweak}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd != nil {
				closeWithin(t, nd, closeBound)
			}
		}
	})
	for i := 0; i < n; i++ {
		c.start(i, "")
	}
	return c
}

// closeBound is how long closing a node may take in tests.
const closeBound = 30 * time.Second

// closeWithin closes nd, failing the test rather than hanging it when that
// takes longer than d.
func closeWithin(t testing.TB, nd *Node, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nd.Close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("node %s did not close within %v", nd.ID(), d)
	}
}

func (c *testCluster) nodeID(i int) string { return fmt.Sprintf("n%d", i+1) }

// start starts node i; addr pins its address (for a restart), empty picks
// a free port.
func (c *testCluster) start(i int, addr string) *Node {
	c.t.Helper()
	cfg := Config{
		NodeID:     c.nodeID(i),
		ListenAddr: "127.0.0.1:0",
		DataDir:    filepath.Join(c.dir, c.nodeID(i)),
	}
	if os.Getenv("RAFTBUS_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if addr != "" {
		cfg.ListenAddr = addr
	}
	for len(c.clocks) <= i {
		c.clocks = append(c.clocks, clock.NewSystem(0))
	}
	cfg.Clock = c.clocks[i]
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	if i > 0 && addr == "" {
		cfg.Join = c.nodes[0].Addr()
	}
	nd, err := Start(cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	for len(c.nodes) <= i {
		c.nodes = append(c.nodes, nil)
	}
	c.nodes[i] = nd
	return nd
}

// stop closes node i and returns its address for a restart.
func (c *testCluster) stop(i int) string {
	addr := c.nodes[i].Addr()
	c.nodes[i].Close()
	c.nodes[i] = nil
	return addr
}

// clients of one node.
type clients struct {
	admin raftbusv1.AdminServiceClient
	msg   raftbusv1.MessagingServiceClient
}

func (c *testCluster) client(i int) clients {
	c.t.Helper()
	return dial(c.t, c.nodes[i].Addr())
}

func dial(t testing.TB, addr string) clients {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return clients{admin: raftbusv1.NewAdminServiceClient(conn), msg: raftbusv1.NewMessagingServiceClient(conn)}
}

// errorInfo extracts the ErrorInfo every error must carry.
func errorInfo(t testing.TB, err error) *raftbusv1.ErrorInfo {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error is not a gRPC status: %v", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info
		}
	}
	t.Fatalf("status without ErrorInfo: %v", err)
	return nil
}

func reasonOf(err error) raftbusv1.ErrorReason {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info.Reason
		}
	}
	return raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

func isRetryable(err error) bool {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info.Retryable
		}
	}
	return false
}

// retry repeats op while it fails with a retryable error, up to timeout: a
// client riding out a leader change.
func retry[T any](t testing.TB, timeout time.Duration, op func(ctx context.Context) (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := op(ctx)
		cancel()
		if err == nil {
			return v
		}
		if !isRetryable(err) && status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("non-retryable error: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(routing.Backoff(attempt))
	}
}

func createQueue(t testing.TB, c clients, q *raftbusv1.QueueProperties) {
	t.Helper()
	retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.CreateQueueResponse, error) {
		resp, err := c.admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: q})
		if reasonOf(err) == raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS {
			return resp, nil // an earlier attempt got through
		}
		return resp, err
	})
}

func sendOne(t testing.TB, c clients, queue, id string) *raftbusv1.SendResult {
	t.Helper()
	resp := retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.SendResponse, error) {
		return c.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: queue, Messages: []*raftbusv1.Message{{MessageId: id, Body: []byte("body " + id)}}})
	})
	return resp.GetResults()[0]
}

// drain receives and completes until want distinct message ids arrived,
// returning them.
func drain(t testing.TB, c clients, queue string, want int, timeout time.Duration) map[string]int {
	t.Helper()
	got := make(map[string]int)
	deadline := time.Now().Add(timeout)
	for len(got) < want {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages within %v", len(got), want, timeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: queue, MaxMessages: 50, MaxWait: durationpb.New(time.Second)})
		cancel()
		if err != nil {
			if !isRetryable(err) {
				t.Fatalf("receive: %v", err)
			}
			continue
		}
		for _, m := range resp.GetMessages() {
			got[m.GetMessage().GetMessageId()]++
			lock := &raftbusv1.MessageLock{EntityPath: queue, PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}
			// A complete repeated after an unknown outcome (a leader
			// change) succeeds whether or not the first took effect.
			retry(t, 20*time.Second, func(ctx context.Context) (*raftbusv1.CompleteResponse, error) {
				return c.msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: lock})
			})
		}
	}
	return got
}
