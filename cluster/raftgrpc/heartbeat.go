package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// Heartbeats travel on one stream per peer, shared by every group on the
// node: a leader sends one to each follower every 50-100 ms (raft's
// HeartbeatTimeout/10), and as unary calls they cost an idle node more CPU
// than everything else its groups did. A peer that does not serve the
// stream (an older version) gets unary calls, as before.
//
// Each heartbeat on the stream was a message of its own, and each message
// wakes the writer and reader goroutines of both nodes and makes a write
// and a read on each side: with 16 idle partitions, most of what three
// nodes did. So the heartbeats that come within heartbeatGather of each
// other go in one message, and the answers ready together go back in one.
// Each side says in the stream's header that it reads such messages; a
// peer of an older version does not, and gets one heartbeat (or answer)
// a message.

// heartbeatGather is how long a heartbeat waits for others to the same
// peer to share its message: short against the heartbeat interval (50-100
// ms) and the follower's timeout (HeartbeatTimeout, 500 ms by default).
const heartbeatGather = 20 * time.Millisecond

// batchesHeader, in the stream's header, says that its sender reads
// heartbeats (or answers) in HeartbeatsRequest.more (HeartbeatsResponse.more).
const batchesHeader = "raftbus-heartbeat-batches"

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
	// batches: the peer reads several heartbeats in one message (its
	// header on the current stream said so).
	batches bool
	// pending are the heartbeats gathered for the current stream's next
	// message, which leaves heartbeatGather after the first of them.
	pending []*raftv1.HeartbeatsRequest
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
	stream, id, now, answer, err := h.enqueue(req)
	if err != nil {
		return nil, err
	}
	if now != nil {
		h.write(stream, now)
	}
	select {
	case a := <-answer:
		return a.resp, a.err
	case <-ctx.Done():
		h.forget(id)
		return nil, ctx.Err()
	}
}

// write sends msg on stream. The stream broken, every heartbeat waiting on
// it fails, and the next one opens a new stream. On io.EOF the stream has
// ended with a status that only Recv reports (the receiving goroutine
// fails the stream with it): a peer without the method must be told apart
// from one that went away.
func (h *heartbeats) write(stream grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse], msg *raftv1.HeartbeatsRequest) {
	h.sendMu.Lock()
	err := stream.Send(msg)
	h.sendMu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) {
		h.fail(stream, err)
	}
}

// enqueue registers a heartbeat for req on the current stream, opening one
// if there is none. It returns the heartbeat's id and the message to send
// now, or nil when the heartbeat waits for others to share its message
// (see flush).
func (h *heartbeats) enqueue(req *raftv1.AppendEntriesRequest) (grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse], uint64, *raftv1.HeartbeatsRequest, chan heartbeatAnswer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unsupported {
		return nil, 0, nil, nil, errNoHeartbeatStream
	}
	if h.stream == nil {
		c, err := h.m.client(h.addr)
		if err != nil {
			return nil, 0, nil, nil, err
		}
		ctx, cancel := context.WithCancel(h.m.ctx)
		ctx = metadata.AppendToOutgoingContext(h.m.withIdentity(ctx, h.id), batchesHeader, "1")
		stream, err := c.Heartbeats(ctx)
		if err != nil {
			cancel()
			return nil, 0, nil, nil, err
		}
		h.stream, h.cancel, h.batches = stream, cancel, false
		h.m.heartbeatStreams.Add(1)
		go h.receive(stream)
	}
	h.next++
	answer := make(chan heartbeatAnswer, 1)
	h.waiting[h.next] = answer
	beat := &raftv1.HeartbeatsRequest{Id: h.next, Request: req}
	if !h.batches {
		return h.stream, h.next, beat, answer, nil
	}
	h.pending = append(h.pending, beat)
	if len(h.pending) == 1 {
		stream := h.stream
		time.AfterFunc(heartbeatGather, func() { h.flush(stream) })
	}
	return h.stream, h.next, nil, answer, nil
}

// flush sends the heartbeats gathered for stream in one message, unless
// the stream has ended meanwhile (its heartbeats have failed then).
func (h *heartbeats) flush(stream grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) {
	h.mu.Lock()
	if h.stream != stream || len(h.pending) == 0 {
		h.mu.Unlock()
		return
	}
	msg := h.pending[0]
	msg.More = h.pending[1:]
	h.pending = nil
	h.mu.Unlock()
	h.write(stream, msg)
}

// receive hands each answer to its heartbeat until the stream fails. The
// header, which comes with the first answer, says whether the peer reads
// several heartbeats in one message.
func (h *heartbeats) receive(stream grpc.BidiStreamingClient[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) {
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err != nil {
			h.fail(stream, err)
			return
		}
		if first {
			if md, err := stream.Header(); err == nil && slices.Contains(md.Get(batchesHeader), "1") {
				h.mu.Lock()
				h.batches = h.stream == stream
				h.mu.Unlock()
			}
		}
		h.answer(msg)
		for _, more := range msg.GetMore() {
			h.answer(more)
		}
	}
}

// answer hands msg to its heartbeat, if its caller still waits.
func (h *heartbeats) answer(msg *raftv1.HeartbeatsResponse) {
	h.mu.Lock()
	answer, ok := h.waiting[msg.GetId()]
	delete(h.waiting, msg.GetId())
	h.mu.Unlock()
	if !ok {
		return // its caller gave up
	}
	if msg.GetError() != "" {
		answer <- heartbeatAnswer{err: errors.New(msg.GetError())}
	} else {
		answer <- heartbeatAnswer{resp: msg.GetResponse()}
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
	h.stream, h.cancel, h.batches, h.pending = nil, nil, false, nil
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

// Heartbeats serves a peer's heartbeat stream: each message's heartbeats
// go to their groups' heartbeat handlers on a goroutine of their own, so
// that a group slow to answer (raft persisting a new term) holds up no
// other message, and the answers go back as they come, a message's
// together, and with the others ready when the peer reads them so.
func (s *transportServer) Heartbeats(stream grpc.BidiStreamingServer[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) error {
	if err := s.admit(stream.Context()); err != nil {
		return err
	}
	if err := stream.SendHeader(metadata.Pairs(batchesHeader, "1")); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	batches := slices.Contains(md.Get(batchesHeader), "1")
	// Cancelled on return: the heartbeats still being answered give up.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	answers := make(chan *raftv1.HeartbeatsResponse)
	received := make(chan error, 1)
	// answer answers the heartbeats of one message, one after the other
	// (a heartbeat is answered at once, unless its group persists a new
	// term), in one message.
	answer := func(msg *raftv1.HeartbeatsRequest) {
		a := s.heartbeat(ctx, msg.GetRequest())
		a.Id = msg.GetId()
		for _, more := range msg.GetMore() {
			b := s.heartbeat(ctx, more.GetRequest())
			b.Id = more.GetId()
			a.More = append(a.More, b)
		}
		select {
		case answers <- a:
		case <-ctx.Done():
		}
	}
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				received <- err
				return
			}
			s.mux.heartbeatMessages.Add(1)
			go answer(msg)
		}
	}()
	for {
		select {
		case a := <-answers:
		gather:
			for batches && len(a.More) < maxAnswersPerMessage {
				select {
				case more := <-answers:
					a.More = append(a.More, more)
					a.More = append(a.More, more.More...)
					more.More = nil
				default:
					break gather
				}
			}
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

// maxAnswersPerMessage bounds the answers sent in one message.
const maxAnswersPerMessage = 256

// heartbeat hands one heartbeat to its group. A group whose raft has not
// installed its heartbeat handler yet answers an error rather than queue
// behind its other RPCs.
func (s *transportServer) heartbeat(ctx context.Context, req *raftv1.AppendEntriesRequest) *raftv1.HeartbeatsResponse {
	// No wait for a group about to open: one heartbeat message carries
	// those of many groups, and a group's first leader sends entries (the
	// configuration) before heartbeats.
	t := s.mux.group(req.GetGroup())
	if t == nil && s.mux.isDormant(req.GetGroup()) {
		return &raftv1.HeartbeatsResponse{Error: fmt.Sprintf("raft group %q is quiet on %s", req.GetGroup(), s.mux.localAddr)}
	}
	if t == nil {
		return &raftv1.HeartbeatsResponse{Error: fmt.Sprintf("raft group %q does not run on %s", req.GetGroup(), s.mux.localAddr)}
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
