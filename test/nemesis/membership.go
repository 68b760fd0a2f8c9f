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
	// Replace kills a node for good; healing starts a new one under a new
	// id with an empty data dir in its place, which joins the cluster, and
	// removes the old id (raftbus node remove): its replicas are
	// re-created on the live nodes.
	Replace Kind = "replace"
)

func init() {
	injectors[Drain] = drain
	injectors[RollingRestart] = rollingRestart
	injectors[Replace] = replace
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

// awaitAnswer waits until node i answers an admin call (see admin).
func (n *Nemesis) awaitAnswer(i int) error {
	return n.admin(i, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
		_, err := a.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		return err
	})
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
	// One fault from the first SIGTERM to the last node answering again,
	// so that any unavailability on the way counts against it.
	n.record("rolling-restart", false, func() error {
		for i := range c.Nodes {
			id := c.Nodes[i].ID
			if err := c.Terminate(i, TermTimeout); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			c.Restart(i)
			if err := n.awaitAnswer(i); err != nil {
				return fmt.Errorf("%s not answering after its restart: %w", id, err)
			}
		}
		return nil
	})
	return func() { n.record("rolling restart done", true, func() error { return nil }) }
}

// removeTimeout bounds how long the removal of a dead node may be
// refused: the cluster must first stop hearing from it (a few seconds).
const removeTimeout = 60 * time.Second

func replace(n *Nemesis) func() {
	c := n.Cluster
	running := n.running()
	// Removing a node needs a quorum of the others in each of its
	// partitions: every other node up.
	if len(running) != len(c.Nodes) {
		return nil
	}
	// An operator replaces one machine at a time: the cluster must be
	// whole again (every replica in place and healthy, no move under way)
	// first. A replica still being rebuilt is a copy short: losing the
	// machine for good then would take a majority of its group.
	if !n.whole(running[0]) || !n.replicasHealthy() {
		return nil
	}
	i := running[n.Rand.IntN(len(running))]
	old := c.Nodes[i].ID
	n.record("replace "+old+": kill it for good", false, func() error { c.Kill(i); return nil })
	return func() {
		// As an operator replaces a dead machine: the old id out of the
		// cluster, then a new node under a new id (on the same address).
		n.record("replace "+old+": the old id removed, a new node started", true, func() error {
			via := (i + 1) % len(c.Nodes)
			deadline := time.Now().Add(removeTimeout)
			for {
				err := n.admin(via, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
					_, err := a.RemoveNode(ctx, &raftbusv1.RemoveNodeRequest{NodeId: old})
					return err
				})
				// Refused while the cluster still hears from the old node.
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return err
				}
				time.Sleep(500 * time.Millisecond)
			}
			id := c.Replace(i)
			if n.Log != nil {
				n.Log("nemesis: %s replaced by %s", old, id)
			}
			return n.admin(i, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
				_, err := a.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
				return err
			})
		})
	}
}

// whole reports whether, as node i sees it, every replica is in place:
// no replica moving and none left on a removed node.
func (n *Nemesis) whole(i int) bool {
	var info *raftbusv1.GetClusterInfoResponse
	err := n.admin(i, func(ctx context.Context, a raftbusv1.AdminServiceClient) error {
		var err error
		info, err = a.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		return err
	})
	if err != nil {
		return false
	}
	for _, node := range info.GetNodes() {
		if node.GetReplicasMoving() > 0 || node.GetMembership() == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED && node.GetReplicas() > 0 {
			return false
		}
	}
	return true
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
