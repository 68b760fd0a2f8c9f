package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// sendUntilStopped keeps senders sending to queue, whatever the answers,
// until the returned stop is called; it returns once some sends were
// acknowledged.
func sendUntilStopped(t *testing.T, c clients, queue string, senders int) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var acked atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.msg.Send(ctx, &raftbusv1.SendRequest{EntityPath: queue, Messages: []*raftbusv1.Message{{Body: []byte("traffic")}}})
				cancel()
				if err == nil {
					acked.Add(1)
				}
			}
		}()
	}
	await.Until(t, 20*time.Second, "sends to "+queue+" to be acknowledged", func() bool { return acked.Load() >= 20 })
	return func() {
		close(done)
		wg.Wait()
	}
}

// TestDeleteAndShutdownUnderTrafficEnd deletes queues while senders keep
// sending to them, and closes the node while they do, again and again:
// the reconciler must close the deleted queues' replicas, and Close must
// return, within a bound.
func TestDeleteAndShutdownUnderTrafficEnd(t *testing.T) {
	c := newTestCluster(t, 1)
	const bound = 20 * time.Second
	for round := range 3 {
		n := c.nodes[0]
		cl := c.client(0)
		for i := range 3 {
			name := fmt.Sprintf("doomed-%d-%d", round, i)
			createQueue(t, cl, &raftbusv1.QueueProperties{Name: name, PartitionCount: proto.Uint32(2)})
			e := n.meta.fsm.Entity(name)
			stop := sendUntilStopped(t, cl, name, 8)
			retry(t, bound, func(ctx context.Context) (*raftbusv1.DeleteQueueResponse, error) {
				resp, err := cl.admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: name})
				if reasonOf(err) == raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
					return resp, nil // an earlier attempt got through
				}
				return resp, err
			})
			await.Until(t, bound, "the deleted queue's replicas to close", func() bool {
				return n.replica(e, 0) == nil && n.replica(e, 1) == nil
			})
			stop()
		}

		name := fmt.Sprintf("kept-%d", round)
		createQueue(t, cl, &raftbusv1.QueueProperties{Name: name, PartitionCount: proto.Uint32(2)})
		stop := sendUntilStopped(t, cl, name, 8)
		addr := n.Addr()
		c.nodes[0] = nil
		closeWithin(t, n, bound)
		stop()
		if t.Failed() {
			return
		}
		c.start(0, addr)
	}
}
