package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// Heartbeats travel on one stream per peer, shared by every group on the
// node: a leader sends one to each follower every 50-100 ms (raft's
// HeartbeatTimeout/10), and as unary calls they cost an idle node more CPU
// than everything else its groups did. A peer that does not serve the
// stream (an older version) gets unary calls, as before.

// heartbeats is the heartbeat stream to one peer, opened on first use and
// again after it fails.
type heartbeats struct {
	m    *Mux
	addr raft.ServerAddress
	id   raft.ServerID

	sendMu sync.Mutex // one Send at a time, as gRPC requires

	mu          sync.Mutex
	stream      grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]
	cancel      context.CancelFunc
	next        uint64
	waiting     map[uint64]chan heartbeatAnswer
	unsupported bool
}

type heartbeatAnswer struct {
	resp *raftv1.AppendEntriesResponse
	err  error
}

// errNoHeartbeatStream is how a peer without the stream is told apart.
var errNoHeartbeatStream = errors.New("peer does not serve the heartbeat stream")

// heartbeatsTo returns the heartbeat stream to the peer id at addr.
func (m *Mux) heartbeatsTo(id raft.ServerID, addr raft.ServerAddress) *heartbeats {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := heartbeatKey{id, addr}
	h, ok := m.heartbeats[key]
	if !ok {
		h = &heartbeats{m: m, addr: addr, id: id, waiting: make(map[uint64]chan heartbeatAnswer)}
		m.heartbeats[key] = h
	}
	return h
}

type heartbeatKey struct {
	id   raft.ServerID
	addr raft.ServerAddress
}

// send sends one heartbeat and waits for its answer until ctx ends. It
// fails with errNoHeartbeatStream when the peer does not serve the stream.
func (h *heartbeats) send(ctx context.Context, req *raftv1.AppendEntriesRequest) (*raftv1.AppendEntriesResponse, error) {
	stream, id, answer, err := h.enqueue()
	if err != nil {
		return nil, err
	}
	h.sendMu.Lock()
	err = stream.Send(&raftv1.HeartbeatsRequest{Id: id, Request: req})
	h.sendMu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) {
		// The stream is broken: every heartbeat waiting on it fails, this
		// one included, and the next one opens a new stream. On io.EOF the
		// stream has ended with a status that only Recv reports (the
		// receiving goroutine fails the stream with it): a peer without
		// the method must be told apart from one that went away.
		h.fail(stream, err)
	}
	select {
	case a := <-answer:
		return a.resp, a.err
	case <-ctx.Done():
		h.forget(id)
		return nil, ctx.Err()
	}
}

// enqueue registers a heartbeat on the current stream, opening one if
// there is none.
func (h *heartbeats) enqueue() (grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse], uint64, chan heartbeatAnswer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unsupported {
		return nil, 0, nil, errNoHeartbeatStream
	}
	if h.stream == nil {
		c, err := h.m.client(h.addr)
		if err != nil {
			return nil, 0, nil, err
		}
		ctx, cancel := context.WithCancel(h.m.ctx)
		stream, err := c.Heartbeats(h.m.withIdentity(ctx, h.id))
		if err != nil {
			cancel()
			return nil, 0, nil, err
		}
		h.stream, h.cancel = stream, cancel
		h.m.heartbeatStreams.Add(1)
		go h.receive(stream)
	}
	h.next++
	answer := make(chan heartbeatAnswer, 1)
	h.waiting[h.next] = answer
	return h.stream, h.next, answer, nil
}

// receive hands each answer to its heartbeat until the stream fails.
func (h *heartbeats) receive(stream grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) {
	for {
		msg, err := stream.Recv()
		if err != nil {
			h.fail(stream, err)
			return
		}
		h.mu.Lock()
		answer, ok := h.waiting[msg.GetId()]
		delete(h.waiting, msg.GetId())
		h.mu.Unlock()
		if !ok {
			continue // its caller gave up
		}
		if msg.GetError() != "" {
			answer <- heartbeatAnswer{err: errors.New(msg.GetError())}
		} else {
			answer <- heartbeatAnswer{resp: msg.GetResponse()}
		}
	}
}

// fail ends stream, if it is still the current one: every heartbeat
// waiting on it fails with err, and the next heartbeat opens a new stream
// (or, when the peer does not have the method, goes unary from then on).
func (h *heartbeats) fail(stream grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse], err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stream != stream {
		return
	}
	h.cancel()
	h.stream, h.cancel = nil, nil
	if status.Code(err) == codes.Unimplemented {
		h.unsupported = true
		err = errNoHeartbeatStream
	} else if errors.Is(err, io.EOF) {
		err = fmt.Errorf("heartbeat stream to %s closed", h.addr)
	}
	for id, answer := range h.waiting {
		answer <- heartbeatAnswer{err: err}
		delete(h.waiting, id)
	}
}

func (h *heartbeats) forget(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiting, id)
}

// Heartbeats serves a peer's heartbeat stream: each heartbeat goes to its
// group's heartbeat handler, on a goroutine of its own so that one group
// slow to answer (raft persisting a new term) holds up no other, and the
// answers go back as they come.
func (s *transportServer) Heartbeats(stream grpc.BidiStreamingServer[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) error {
	if err := s.admit(stream.Context()); err != nil {
		return err
	}
	// Cancelled on return: the heartbeats still being answered give up.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	answers := make(chan *raftv1.HeartbeatsResponse)
	received := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				received <- err
				return
			}
			go func() {
				a := s.heartbeat(ctx, msg.GetRequest())
				a.Id = msg.GetId()
				select {
				case answers <- a:
				case <-ctx.Done():
				}
			}()
		}
	}()
	for {
		select {
		case a := <-answers:
			if err := stream.Send(a); err != nil {
				return err
			}
		case err := <-received:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// heartbeat hands one heartbeat to its group. A group whose raft has not
// installed its heartbeat handler yet answers an error rather than queue
// behind its other RPCs.
func (s *transportServer) heartbeat(ctx context.Context, req *raftv1.AppendEntriesRequest) *raftv1.HeartbeatsResponse {
	t, err := s.groupTransport(req.GetGroup())
	if err != nil {
		return &raftv1.HeartbeatsResponse{Error: err.Error()}
	}
	command := appendEntriesRequestFromProto(req)
	if !isHeartbeat(command) {
		return &raftv1.HeartbeatsResponse{Error: "not a heartbeat: it carries entries or a commit index"}
	}
	if t.heartbeatHandler() == nil {
		return &raftv1.HeartbeatsResponse{Error: fmt.Sprintf("raft group %q is not running yet", req.GetGroup())}
	}
	ctx, cancel := context.WithTimeout(ctx, s.mux.timeout)
	defer cancel()
	resp, err := t.handle(ctx, command, true)
	if err != nil {
		return &raftv1.HeartbeatsResponse{Error: err.Error()}
	}
	out, err := responseAs[*raft.AppendEntriesResponse](resp)
	if err != nil {
		return &raftv1.HeartbeatsResponse{Error: err.Error()}
	}
	return &raftv1.HeartbeatsResponse{Response: appendEntriesResponseToProto(out)}
}
