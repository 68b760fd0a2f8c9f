package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftbus/raftbus/partition"
)

// drainWait bounds how long a node shutting down waits for the requests
// in flight: sends and settlements end in milliseconds, and a long poll
// for messages cut short is repeated by the client at another node.
const drainWait = 2 * time.Second

// handOffRetry spaces the rounds of hand-overs while a node shuts down:
// a group whose followers were not ready, or that a peer handed back,
// is tried again.
const handOffRetry = 50 * time.Millisecond

// Shutdown stops the node gracefully, as on SIGTERM: it refuses to take
// leadership from now on, hands every group it leads (the metadata group
// and each partition) to an up-to-date peer, lets the requests in flight
// finish (long polls for messages up to drainWait), and closes. A partition hands over only after the entries on
// their way were answered (partition.HandOver), so its callers see a
// retryable refusal, not an unknown outcome. When ctx ends first, what is
// left is cut short as Close does.
func (n *Node) Shutdown(ctx context.Context) error {
	// Probes and load balancers first: the node is going away.
	if n.draining.CompareAndSwap(false, true) {
		close(n.drained)
	}
	n.grpcHealth.Shutdown()
	n.mux.RefuseLeadership()
	for {
		led := n.handOffAll(ctx)
		if led == 0 {
			n.log.Info("shutting down: no group left to hand over")
			break
		}
		select {
		case <-ctx.Done():
			n.log.Warn("shutting down before every group was handed over", "still_leading", led)
		case <-time.After(handOffRetry):
			continue
		}
		break
	}
	stopped := make(chan struct{})
	go func() {
		n.server.GracefulStop()
		close(stopped)
	}()
	wait := time.NewTimer(drainWait)
	defer wait.Stop()
	select {
	case <-stopped:
	case <-wait.C:
		n.log.Info("shutting down: cutting the long polls still waiting")
	case <-ctx.Done():
	}
	return n.Close()
}

// handOffAll hands over, concurrently, every group this node leads, and
// returns how many it led that have another voter to hand to. A group
// whose only voter is this node (a single-node cluster) is not counted:
// waiting would not find it a successor.
func (n *Node) handOffAll(ctx context.Context) int {
	var wg sync.WaitGroup
	var led atomic.Int32
	handOff := func(what string, handOver func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := handOver()
			if !errors.Is(err, partition.ErrSoleVoter) {
				led.Add(1)
			}
			n.log.Debug("shutting down: hand over "+what, "err", err)
		}()
	}
	if n.meta.isLeader() {
		handOff("the metadata group", func() error {
			return partition.HandOver(ctx, n.meta.raft, n.meta.followers, "", n.raftTimes(partition.DefaultElectionTimeout))
		})
	}
	n.mu.RLock()
	for _, r := range n.replicas {
		if r.p.IsLeader() {
			handOff("partition "+r.group, func() error { return r.p.HandOver(ctx, "") })
		}
	}
	n.mu.RUnlock()
	wg.Wait()
	return int(led.Load())
}
