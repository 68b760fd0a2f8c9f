package failover

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	"github.com/raftbus/raftbus/test/history"
)

// Finish ends a run once the faults are healed and the workload stopped:
// it waits for the locks still held to run out, drains every entity that
// may exist and its dead-letter sub-queue, and records the digests of the
// long-lived entities' replicas.
func (w *Workload) Finish(ctx context.Context) error {
	queues, names := w.entities.snapshot()
	type target struct {
		path string
		r    func(opts *client.ReceiverOptions) (*client.Receiver, error)
	}
	var targets []target
	for _, q := range queues {
		targets = append(targets, target{q, func(o *client.ReceiverOptions) (*client.Receiver, error) { return w.Client.NewReceiverForQueue(q, o) }})
	}
	for _, s := range names {
		targets = append(targets, target{subPath(s), func(o *client.ReceiverOptions) (*client.Receiver, error) {
			return w.Client.NewReceiverForSubscription(Topic, s, o)
		}})
	}
	if err := w.forwarded(ctx, ForwardQueue); err != nil {
		return err
	}
	for _, t := range targets {
		if err := w.unlocked(ctx, t.path); err != nil {
			return err
		}
	}
	for _, t := range targets {
		for _, dlq := range []bool{false, true} {
			opts := &client.ReceiverOptions{}
			if dlq {
				opts.SubQueue = client.SubQueueDeadLetter
			}
			r, err := t.r(opts)
			if err != nil {
				return err
			}
			if err := w.drain(ctx, r, t.path, dlq); err != nil {
				return err
			}
		}
	}
	for _, path := range []string{WorkQueue, SessionQueue, PlainQueue, Topic, ForwardQueue, ForwardTarget} {
		if err := w.digests(ctx, path); err != nil {
			return err
		}
	}
	return nil
}

// unlocked waits until no message of path is locked, so that the drain
// finds each message where its last lock left it. It gives up quietly
// after a while: the checker's rules allow for locks still held.
func (w *Workload) unlocked(ctx context.Context, path string) error {
	deadline := time.Now().Add(3 * lockDuration)
	for time.Now().Before(deadline) {
		var locked int64
		err := until(ctx, "runtime of "+path, func(ctx context.Context) error {
			props, err := w.runtime(ctx, path)
			locked = props.GetLockedMessageCount()
			return err
		})
		if notFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if locked == 0 {
			return nil
		}
		pause(ctx, 200*time.Millisecond)
	}
	return nil
}

// forwarded waits until nothing of path is in transfer, so that the drain
// finds every forwarded message in its target. It gives up quietly after
// a while: the checker then reports what is missing.
func (w *Workload) forwarded(ctx context.Context, path string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var transfer int64
		err := until(ctx, "runtime of "+path, func(ctx context.Context) error {
			props, err := w.runtime(ctx, path)
			transfer = props.GetTransferMessageCount()
			return err
		})
		if err != nil {
			return err
		}
		if transfer == 0 {
			return nil
		}
		pause(ctx, 200*time.Millisecond)
	}
	return nil
}

func (w *Workload) runtime(ctx context.Context, path string) (*admin.RuntimeProperties, error) {
	for _, s := range w.subNames() {
		if path == subPath(s) {
			return w.Admin.GetSubscriptionRuntimeProperties(ctx, Topic, s)
		}
	}
	return w.Admin.GetQueueRuntimeProperties(ctx, path)
}

func (w *Workload) subNames() []string {
	_, names := w.entities.snapshot()
	return names
}

const codeNotFound = "NOT_FOUND"

func notFound(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == client.CodeNotFound
}

// drain records what is left in path (or its dead-letter sub-queue) by
// peeking every message: active, locked, scheduled and deferred alike. An
// entity that does not exist (its creation failed after all) is skipped.
func (w *Workload) drain(ctx context.Context, r *client.Receiver, path string, dlq bool) error {
	op := history.Op{Kind: history.Drain, Entity: path, DLQ: dlq, Start: w.History.Now()}
	for {
		var msgs []*client.ReceivedMessage
		err := until(ctx, "drain "+path, func(ctx context.Context) error {
			var err error
			msgs, err = r.PeekMessages(ctx, 500, nil)
			return err
		})
		if notFound(err) {
			// Recorded: an entity the checker expects may have vanished.
			op.End, op.Outcome, op.Error, op.Code = w.History.Now(), history.Fail, err.Error(), codeNotFound
			op.Messages = nil
			w.History.Record(op)
			return nil
		}
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			break
		}
		// A dead-lettered message keeps the number it was acknowledged
		// with: the checker holds the dead-letter sub-queue's numbers to
		// the same rules as the main queue's.
		op.Messages = append(op.Messages, w.deliveries(msgs)...)
	}
	op.End = w.History.Now()
	w.History.Record(op)
	return nil
}

// digests records the digest of every replica of every partition of path,
// once the replicas of each partition report one applied index twice in a
// row (the cluster has settled) and again after the digests were taken,
// or as they stand after two minutes. Each round asks where the replicas
// are: a drain, an undrain or a replacement healed just before may still
// be moving one.
func (w *Workload) digests(ctx context.Context, path string) error {
	routes, err := w.replicaRoutes(ctx, path)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(routes)) {
		// Settle on cheap rounds first: a digest encodes the whole state
		// and may take seconds, while the replicas' indexes move on.
		// Then take the digests, and keep them only if a round after them
		// finds the replicas where the digests found them.
		addrs := routes[id]
		var prev, last, digests []history.Op
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if routes, err := w.replicaRoutes(ctx, path); err == nil {
				addrs = routes[id]
			}
			last = w.replicaStates(ctx, path, id, addrs, false)
			if settled(prev, last) {
				digests = w.replicaStates(ctx, path, id, addrs, true)
				if after := w.replicaStates(ctx, path, id, addrs, false); settled(digests, after) {
					break
				}
				digests = nil
			}
			prev = last
			pause(ctx, 300*time.Millisecond)
		}
		if digests == nil {
			digests = w.replicaStates(ctx, path, id, addrs, true)
		}
		for _, op := range digests {
			w.History.Record(op)
		}
	}
	return nil
}

// replicaRoutes is where the routing table places each partition's
// replicas of path, by partition id.
func (w *Workload) replicaRoutes(ctx context.Context, path string) (map[uint32][]string, error) {
	routes := make(map[uint32][]string)
	err := until(ctx, "routes of "+path, func(ctx context.Context) error {
		table, err := w.Admin.GetRoutingTable(ctx, path)
		if err != nil {
			return err
		}
		clear(routes)
		for _, e := range table {
			for _, p := range e.GetPartitions() {
				routes[p.GetPartitionId()] = slices.Sorted(slices.Values(p.GetReplicaAddresses()))
			}
		}
		return nil
	})
	return routes, err
}

// settled reports whether the same replicas as in the previous round all
// answered, at one applied index, the same as in the previous round.
func settled(prev, cur []history.Op) bool {
	if len(prev) != len(cur) || len(cur) == 0 {
		return false
	}
	for i, op := range cur {
		if op.Outcome != history.OK || op.Node != prev[i].Node || op.Applied != cur[0].Applied || op.Applied != prev[i].Applied {
			return false
		}
	}
	return true
}

func (w *Workload) replicaStates(ctx context.Context, path string, id uint32, addrs []string, digest bool) []history.Op {
	var out []history.Op
	for _, addr := range addrs {
		op := history.Op{Kind: history.Digest, Entity: path, Partition: id, Node: addr, Start: w.History.Now()}
		resp, err := w.partitionStatus(ctx, addr, path, id, digest)
		op.End = w.History.Now()
		if err != nil {
			op.Outcome, op.Error = history.Fail, err.Error()
		} else {
			op.Outcome, op.Applied, op.Digest = history.OK, resp.GetAppliedIndex(), hex.EncodeToString(resp.GetDigest())
		}
		out = append(out, op)
	}
	return out
}

// partitionStatus asks the node at addr for its replica's state. The node
// service answers nodes only: with TLS the call presents NodeTLS.
func (w *Workload) partitionStatus(ctx context.Context, addr, path string, id uint32, digest bool) (*clusterv1.PartitionStatusResponse, error) {
	creds := insecure.NewCredentials()
	if w.NodeTLS != nil {
		creds = credentials.NewTLS(w.NodeTLS)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return clusterv1.NewNodeServiceClient(conn).PartitionStatus(ctx, &clusterv1.PartitionStatusRequest{EntityPath: path, PartitionId: id, IncludeDigest: digest})
}
