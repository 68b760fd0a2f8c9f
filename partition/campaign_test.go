package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
)

// electingTransport is an in-memory transport that can deliver its own
// node a TimeoutNow request, as raftgrpc.GroupTransport.ElectNow does.
type electingTransport struct {
	*raft.InmemTransport
	rpcs chan raft.RPC
}

func newElectingTransport(t *testing.T, inner *raft.InmemTransport) *electingTransport {
	e := &electingTransport{InmemTransport: inner, rpcs: make(chan raft.RPC)}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case rpc := <-inner.Consumer():
				select {
				case e.rpcs <- rpc:
				case <-stop:
					return
				}
			case <-stop:
				return
			}
		}
	}()
	return e
}

func (e *electingTransport) Consumer() <-chan raft.RPC { return e.rpcs }

func (e *electingTransport) ElectNow(ctx context.Context) error {
	resp := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}}, RespChan: resp}
	select {
	case e.rpcs <- rpc:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r := <-resp:
		return r.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestTheCampaigningFounderLeadsANewGroupAtOnce: with timeouts of a
// minute, a new group has a leader within the test only because one
// founder stands for election as it starts; it is that founder, and it
// says it leads once it serves.
func TestTheCampaigningFounderLeadsANewGroupAtOnce(t *testing.T) {
	leading := make(chan struct{}, 1)
	c := newTestCluster(t, 3, func(cfg *partition.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Minute, time.Minute
		// The last founder to start campaigns: the others already run.
		if cfg.NodeID == nodeID(2) {
			cfg.Campaign = true
			cfg.Transport = newElectingTransport(t, cfg.Transport.(*raft.InmemTransport))
			cfg.OnLeading = func() {
				select {
				case leading <- struct{}{}:
				default:
				}
			}
		}
	})
	await.Until(t, 10*time.Second, "node2 to lead", func() bool {
		return c.replicas[2].IsLeader()
	})
	select {
	case <-leading:
	case <-time.After(10 * time.Second):
		t.Fatal("node2 leads but OnLeading was not called")
	}
	for i := range 2 {
		if c.replicas[i].IsLeader() {
			t.Errorf("node%d leads too", i)
		}
	}
}
