package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// GroupTransport is the raft.Transport of one Raft group on one node. Its
// outgoing RPCs travel on the connections of its Mux; its incoming RPCs come
// from the Mux's server and are handed to raft on Consumer.
type GroupTransport struct {
	mux   *Mux
	group string

	consumerCh chan raft.RPC

	// ctx is cancelled by Close: it aborts the outgoing RPCs in flight and
	// releases the server handlers waiting for raft.
	ctx    context.Context
	cancel context.CancelFunc

	heartbeatMu sync.Mutex
	heartbeatFn func(raft.RPC)

	pipelinesMu sync.Mutex
	closed      bool
	pipelines   map[*appendPipeline]struct{}
}

var (
	_ raft.Transport   = (*GroupTransport)(nil)
	_ raft.WithClose   = (*GroupTransport)(nil)
	_ raft.WithPreVote = (*GroupTransport)(nil)
)

func newGroupTransport(m *Mux, group string) *GroupTransport {
	ctx, cancel := context.WithCancel(m.ctx)
	return &GroupTransport{
		mux:        m,
		group:      group,
		consumerCh: make(chan raft.RPC),
		ctx:        ctx,
		cancel:     cancel,
		pipelines:  make(map[*appendPipeline]struct{}),
	}
}

// Group is the name of the Raft group this transport carries.
func (t *GroupTransport) Group() string { return t.group }

// Consumer delivers the RPCs peers send to this group.
func (t *GroupTransport) Consumer() <-chan raft.RPC { return t.consumerCh }

// LocalAddr is the node's advertised gRPC address, the same in every group.
func (t *GroupTransport) LocalAddr() raft.ServerAddress { return t.mux.localAddr }

// EncodePeer encodes a peer as its address, like raft's own transports.
func (t *GroupTransport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer is the inverse of EncodePeer.
func (t *GroupTransport) DecodePeer(buf []byte) raft.ServerAddress {
	return raft.ServerAddress(buf)
}

// SetHeartbeatHandler installs the fast path for heartbeats: they go to cb
// directly instead of queueing on Consumer behind slower RPCs.
func (t *GroupTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	t.heartbeatMu.Lock()
	defer t.heartbeatMu.Unlock()
	t.heartbeatFn = cb
}

func (t *GroupTransport) heartbeatHandler() func(raft.RPC) {
	t.heartbeatMu.Lock()
	defer t.heartbeatMu.Unlock()
	return t.heartbeatFn
}

// Close stops the transport: it is unregistered from its Mux (incoming RPCs
// for the group fail with NOT_FOUND), its pipelines are closed and its RPCs
// in flight are cancelled. It does not close the shared connections.
func (t *GroupTransport) Close() error {
	t.mux.unregister(t)
	t.pipelinesMu.Lock()
	if t.closed {
		t.pipelinesMu.Unlock()
		return nil
	}
	t.closed = true
	pipelines := t.pipelines
	t.pipelines = nil
	t.pipelinesMu.Unlock()

	t.cancel()
	for p := range pipelines {
		p.Close()
	}
	return nil
}

// AppendEntries sends one AppendEntries RPC and waits for its answer.
// Heartbeats go on the peer's heartbeat stream.
func (t *GroupTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if isHeartbeat(args) {
		err := t.heartbeat(id, target, args, resp)
		if !errors.Is(err, errNoHeartbeatStream) {
			return err
		}
	}
	err := t.call(id, target, t.mux.timeout, func(ctx context.Context, c raftv1.RaftTransportServiceClient) error {
		out, err := c.AppendEntries(ctx, appendEntriesRequestToProto(t.group, args))
		if err != nil {
			return err
		}
		*resp = appendEntriesResponseFromProto(out)
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftgrpc: append entries to %s (group %s): %w", target, t.group, err)
	}
	return nil
}

// heartbeat sends a heartbeat on the heartbeat stream to target.
func (t *GroupTransport) heartbeat(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.ctx.Err(); err != nil {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.mux.timeout)
	defer cancel()
	out, err := t.mux.heartbeatsTo(id, target).send(ctx, appendEntriesRequestToProto(t.group, args))
	if err != nil {
		if errors.Is(err, errNoHeartbeatStream) {
			return err
		}
		return fmt.Errorf("raftgrpc: heartbeat to %s (group %s): %w", target, t.group, err)
	}
	*resp = appendEntriesResponseFromProto(out)
	return nil
}

// RequestVote asks target for its vote.
func (t *GroupTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	err := t.call(id, target, t.mux.timeout, func(ctx context.Context, c raftv1.RaftTransportServiceClient) error {
		out, err := c.RequestVote(ctx, requestVoteRequestToProto(t.group, args))
		if err != nil {
			return err
		}
		*resp = requestVoteResponseFromProto(out)
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftgrpc: request vote from %s (group %s): %w", target, t.group, err)
	}
	return nil
}

// RequestPreVote asks target whether it would grant its vote.
func (t *GroupTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	err := t.call(id, target, t.mux.timeout, func(ctx context.Context, c raftv1.RaftTransportServiceClient) error {
		out, err := c.RequestPreVote(ctx, requestPreVoteRequestToProto(t.group, args))
		if err != nil {
			return err
		}
		*resp = requestPreVoteResponseFromProto(out)
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftgrpc: request pre-vote from %s (group %s): %w", target, t.group, err)
	}
	return nil
}

// TimeoutNow makes target start an election at once.
func (t *GroupTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	err := t.call(id, target, t.mux.timeout, func(ctx context.Context, c raftv1.RaftTransportServiceClient) error {
		out, err := c.TimeoutNow(ctx, timeoutNowRequestToProto(t.group, args))
		if err != nil {
			return err
		}
		*resp = timeoutNowResponseFromProto(out)
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftgrpc: timeout now to %s (group %s): %w", target, t.group, err)
	}
	return nil
}

// call runs one outgoing RPC to server id at target under a deadline;
// Close cancels it.
func (t *GroupTransport) call(id raft.ServerID, target raft.ServerAddress, timeout time.Duration, rpc func(context.Context, raftv1.RaftTransportServiceClient) error) error {
	if err := t.ctx.Err(); err != nil {
		return ErrClosed
	}
	c, err := t.mux.client(target)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	return rpc(t.mux.withIdentity(ctx, id), c)
}

// isHeartbeat reports whether req is a heartbeat: a request with only the
// term and the leader set, which raft answers without touching its log. The
// test is the one of raft's NetworkTransport.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.RPCHeader.Addr
	if len(leader) == 0 {
		leader = req.Leader
	}
	return req.Term != 0 && leader != nil &&
		req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// deliver hands an incoming RPC to raft: heartbeats to the heartbeat handler
// when one is set, everything else to Consumer. ctx is the incoming call's.
func (t *GroupTransport) deliver(ctx context.Context, rpc raft.RPC, heartbeat bool) error {
	if heartbeat {
		if fn := t.heartbeatHandler(); fn != nil {
			fn(rpc)
			return nil
		}
	}
	select {
	case t.consumerCh <- rpc:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.ctx.Done():
		return ErrClosed
	}
}

// await waits for raft's answer to a delivered RPC.
func (t *GroupTransport) await(ctx context.Context, respCh <-chan raft.RPCResponse) (any, error) {
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			return nil, &handlerError{err: resp.Error}
		}
		return resp.Response, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.ctx.Done():
		return nil, ErrClosed
	}
}

// handle delivers an incoming RPC without a data stream and waits for raft's
// answer.
func (t *GroupTransport) handle(ctx context.Context, command any, heartbeat bool) (any, error) {
	respCh := make(chan raft.RPCResponse, 1)
	if err := t.deliver(ctx, raft.RPC{Command: command, RespChan: respCh}, heartbeat); err != nil {
		return nil, err
	}
	return t.await(ctx, respCh)
}

// handlerError is an error raft's handler answered an RPC with; it goes
// back to the caller, which returns it from the Transport method.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// trackPipeline registers p so that Close closes it; it fails once the
// transport is closed.
func (t *GroupTransport) trackPipeline(p *appendPipeline) error {
	t.pipelinesMu.Lock()
	defer t.pipelinesMu.Unlock()
	if t.closed {
		return ErrClosed
	}
	t.pipelines[p] = struct{}{}
	return nil
}

func (t *GroupTransport) untrackPipeline(p *appendPipeline) {
	t.pipelinesMu.Lock()
	defer t.pipelinesMu.Unlock()
	delete(t.pipelines, p)
}

var errUnexpectedMessage = errors.New("unexpected message")

// ElectNow makes the group's raft on this node stand for election at
// once, as it does when a leader hands it the leadership (a TimeoutNow
// request, delivered here rather than sent by a peer). A group just
// created elects its first leader this way instead of waiting out a
// heartbeat timeout, which made creating an entity take a second. Raft
// grants the vote only to a candidate whose log is as long as the voter's,
// so this can never take leadership from a group that already has a
// fuller leader; it can only cost an election.
func (t *GroupTransport) ElectNow(ctx context.Context) error {
	_, err := t.handle(ctx, &raft.TimeoutNowRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(t.mux.localAddr)},
	}, false)
	if err != nil {
		return fmt.Errorf("raftgrpc: group %s: elect now: %w", t.group, err)
	}
	return nil
}
