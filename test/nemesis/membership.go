package nemesis

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Faults of planned operations: what an operator does to a healthy
// cluster, which must cost its users nothing.
const (
	// Drain drains a node (raftbus node drain): its replicas move to the
	// other nodes, leadership first, while the workload runs; healing
	// makes it active again, and replicas move back as the cluster
	// rebalances. Needs four nodes or more (three must hold each
	// partition).
	Drain Kind = "drain"
	// RollingRestart stops every node in turn with SIGTERM (it hands its
	// leaderships over first), starts it again and waits for it to answer
	// before the next.
	RollingRestart Kind = "rolling-restart"
)

func init() {
	injectors[Drain] = drain
	injectors[RollingRestart] = rollingRestart
}

// adminCallTimeout bounds the nemesis' admin calls, retried while the
// answer says a retry may help (a metadata leader being elected).
const adminCallTimeout = 30 * time.Second

// admin calls fn on node i's admin service until it succeeds, fails
// for good or adminCallTimeout passes.
func (n *Nemesis) admin(i int, fn func(ctx context.Context, c raftbusv1.AdminServiceClient) error) error {
	c := raftbusv1.NewAdminServiceClient(n.Cluster.Conn(i))
	deadline := time.Now().Add(adminCallTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fn(ctx, c)
		cancel()
		if err == nil || !retryable(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func drain(n *Nemesis) func() {
	c := n.Cluster
	running := n.running()
	if len(c.Nodes) < 4 || len(running) < 2 {
		return nil
	}
	i := running[n.Rand.IntN(len(running))]
	via := running[0]
	if via == i {
		via = running[1]
	}
	id := c.Nodes[i].ID
	n.record("drain "+id, false, func() error {
		return n.admin(via, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
			_, err := a.DrainNode(ctx, &raftbusv1.DrainNodeRequest{NodeId: id})
			return err
		})
	})
	return func() {
		n.record("undrain "+id, true, func() error {
			return n.admin(via, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
				_, err := a.UndrainNode(ctx, &raftbusv1.UndrainNodeRequest{NodeId: id})
				return err
			})
		})
	}
}

func rollingRestart(n *Nemesis) func() {
	c := n.Cluster
	if len(n.running()) != len(c.Nodes) {
		return nil
	}
	for i := range c.Nodes {
		id := c.Nodes[i].ID
		n.record("term "+id+" (rolling restart)", false, func() error { return c.Terminate(i, TermTimeout) })
		n.record("restart "+id+" (rolling restart)", true, func() error {
			c.Restart(i)
			err := n.admin(i, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
				_, err := a.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
				return err
			})
			if err != nil {
				return fmt.Errorf("%s not answering after its restart: %w", id, err)
			}
			return nil
		})
	}
	// Nothing is left to heal.
	return func() {}
}

// retryable reports whether err says the call may succeed if repeated;
// no answer at all (a node starting, a timeout) may too.
func retryable(err error) bool {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info.Retryable
		}
	}
	return st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded
}
