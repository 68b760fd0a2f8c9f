package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/rpcreach"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A Receiver (not a SessionReceiver, whose receives stay unary) receives
// on a ReceiveStream: a stream it keeps open to the node a unary receive
// would go to, on which each receive is a grant of credit (a receive id,
// how many messages, how long to wait). The server serves the grants as
// they come, at once, each as the unary Receive with its receive id, and
// answers each when it is done, so several receives outstanding at once
// (a Processor's prefetch, goroutines sharing the Receiver) have their
// messages locked together, and the next ones locked while the last are
// handled, without a round trip between them.
//
// A stream that breaks leaves its outstanding grants of unknown outcome,
// as a unary receive whose connection broke: each is recovered as
// receiveUnary recovers one, with a replay of its receive id (what it
// received, and nothing new), else kept for the next receive to claim.
// The next grant opens a new stream. A receive whose caller gives up (its
// ctx ends) breaks the stream too, so that it cannot receive once no one
// waits for it: it is kept for the next receive to claim, as a unary
// receive cut short is.

// receiveLink is a Receiver's ReceiveStream, opened lazily and again after
// it broke.
type receiveLink struct {
	r *Receiver

	mu  sync.Mutex
	cur *linkStream // nil: none open
	// closed: no stream is opened any more (the Processor owning the
	// Receiver is closing).
	closed bool
}

// linkStream is one ReceiveStream and its grants awaiting their response.
type linkStream struct {
	stream raftbusv1.MessagingService_ReceiveStreamClient
	cancel context.CancelFunc
	addr   string
	opened time.Time
	// partition is the one partition the stream receives from (that of
	// an unpartitioned entity), nil: across partitions.
	partition *uint32
	pending   []*grant // awaiting their response, guarded by receiveLink.mu
}

// grant is one receive on a stream.
type grant struct {
	id        []byte
	partition *uint32
	addr      string
	stream    *linkStream
	done      chan struct{} // closed once resp or broken is set

	// Guarded by receiveLink.mu.
	resp      *raftbusv1.ReceiveStreamResponse
	broken    error // the stream ended before the grant's response
	finished  bool
	abandoned bool // its caller stopped waiting (its ctx ended)
}

// maxStreamAge is how long a stream takes new grants. The node checks
// each grant with the token the stream was opened with (signed for an
// hour, renewed five minutes before its end, see sasCredential): a newer
// stream carries a newer token.
const maxStreamAge = 10 * time.Minute

var errLinkClosed = &Error{Code: CodeInvalidArgument, Message: "the receiver is closed"}

// grant grants the stream one receive of up to maxMessages, waiting up to
// wait from when the server reads it, opening a stream when none is open
// (or when the entity's only partition moved to another leader, or the
// stream is old).
func (l *receiveLink) grant(ctx context.Context, maxMessages int, wait time.Duration) (*grant, error) {
	addr, partition, err := l.r.streamTarget(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errLinkClosed
	}
	if s := l.cur; s != nil && (addr != "" && s.addr != addr || !samePartition(s.partition, partition) || time.Since(s.opened) > maxStreamAge) {
		// Retired: the stream's grants are answered, then it ends; new
		// grants go on a new stream, to the leader (or across the
		// partitions of an entity made anew with more).
		l.cur = nil
		s.stream.CloseSend()
	}
	for attempt := 0; ; attempt++ {
		if l.cur == nil {
			if l.cur, err = l.open(ctx, addr, partition); err != nil {
				return nil, err
			}
		}
		s := l.cur
		g := &grant{id: newReceiveID(), partition: s.partition, addr: s.addr, stream: s, done: make(chan struct{})}
		err := s.stream.Send(&raftbusv1.ReceiveStreamRequest{Request: &raftbusv1.ReceiveStreamRequest_Credit{Credit: &raftbusv1.ReceiveCredit{
			ReceiveId: g.id, MaxMessages: int32(maxMessages), MaxWait: durationpb.New(wait),
		}}})
		if err == nil {
			s.pending = append(s.pending, g)
			return g, nil
		}
		// The stream ended (its reader tells its grants): this grant did
		// not leave, so it is granted on a new stream.
		l.cur = nil
		s.cancel()
		if attempt > 0 {
			return nil, asError(err)
		}
	}
}

// samePartition reports whether a and b name the same partition, or both
// none.
func samePartition(a, b *uint32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// streamTarget is where a stream goes: to the leader of the entity's only
// partition (partition set), else to any node ("" when the open stream
// will do), which receives across partitions.
func (r *Receiver) streamTarget(ctx context.Context) (addr string, partition *uint32, err error) {
	parts, err := r.c.routes.partitions(ctx, routeKey(r.path))
	if err != nil || parts != 1 {
		return "", nil, err
	}
	zero := uint32(0)
	addr, err = r.c.leaderOf(ctx, r.path, 0)
	if err != nil || r.c.avoided(addr) {
		// The node the stream goes to forwards to the leader.
		return "", &zero, err
	}
	return addr, &zero, nil
}

// open opens a stream to addr (any node when "") for partition (nil: all)
// and starts reading its responses. The stream outlives the caller's ctx,
// which bounds only the opening (a node that cannot be reached does not
// hold the caller beyond it). Called with l.mu held.
func (l *receiveLink) open(callerCtx context.Context, addr string, partition *uint32) (*linkStream, error) {
	if addr == "" {
		addr = l.r.c.seed()
	}
	cc, err := l.r.c.conn(addr)
	if err != nil {
		return nil, err
	}
	conn := rpcreach.Wrap(cc)
	ctx, cancel := context.WithCancel(context.Background())
	openingFor := context.AfterFunc(callerCtx, cancel)
	stream, err := raftbusv1.NewMessagingServiceClient(conn).ReceiveStream(ctx)
	if err == nil {
		err = stream.Send(&raftbusv1.ReceiveStreamRequest{Request: &raftbusv1.ReceiveStreamRequest_Open{Open: &raftbusv1.ReceiveStreamOpen{
			EntityPath: l.r.path, SubQueue: l.r.sub, ReceiveMode: l.r.mode, PartitionId: partition,
		}}})
	}
	if !openingFor() && err == nil {
		err = callerCtx.Err() // the caller gave up as it opened
	}
	if err != nil {
		cancel()
		err = callError(err, conn, addr)
		l.r.c.noteReach(addr, err)
		return nil, err
	}
	s := &linkStream{stream: stream, cancel: cancel, addr: addr, opened: time.Now(), partition: partition}
	go l.read(s)
	return s, nil
}

// read hands each response of s to its grant until s ends.
func (l *receiveLink) read(s *linkStream) {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			l.end(s, err)
			return
		}
		if !l.answer(s, resp) {
			s.cancel()
			l.end(s, &Error{Code: CodeOutcomeUnknown, Retryable: true,
				Message: fmt.Sprintf("the receive stream to %s answered grant %x, which it was not given or answered before", s.addr, resp.GetReceiveId())})
			return
		}
	}
}

// answer gives resp to the grant of s it answers (grants are answered as
// they are done, not in the order granted), and reports false when no
// grant awaits it.
func (l *receiveLink) answer(s *linkStream, resp *raftbusv1.ReceiveStreamResponse) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(s.pending, func(g *grant) bool { return string(g.id) == string(resp.GetReceiveId()) })
	if i < 0 {
		return false
	}
	g := s.pending[i]
	s.pending = slices.Delete(s.pending, i, i+1)
	if g.abandoned {
		// Its caller gave up as it was answered: a replay gets what it
		// received.
		l.r.remember(unclaimedReceive{id: g.id, partition: g.partition})
		return true
	}
	g.resp, g.finished = resp, true
	close(g.done)
	return true
}

// end ends s: its grants awaiting a response learn that it broke (those
// abandoned are kept for the next receive to claim).
func (l *receiveLink) end(s *linkStream, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == s {
		l.cur = nil
	}
	s.cancel()
	for _, g := range s.pending {
		if g.abandoned {
			l.r.remember(unclaimedReceive{id: g.id, partition: g.partition})
			continue
		}
		g.broken, g.finished = err, true
		close(g.done)
	}
	s.pending = nil
}

// abandon marks g as given up by its caller and breaks its stream (see
// above), and reports false when its answer came first (the caller takes
// it).
func (l *receiveLink) abandon(g *grant) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g.finished {
		return false
	}
	g.abandoned = true
	g.stream.cancel()
	return true
}

// close breaks the open stream, whose grants are recovered by their
// callers; final: no stream is opened again.
func (l *receiveLink) close(final bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = l.closed || final
	if l.cur != nil {
		l.cur.cancel()
		l.cur = nil
	}
}

// receiveGranted receives on the stream: up to maxMessages, waiting up to
// wait.
func (r *Receiver) receiveGranted(ctx context.Context, maxMessages int, wait time.Duration) ([]*ReceivedMessage, error) {
	g, err := r.link.grant(ctx, maxMessages, wait)
	if errors.Is(err, errLinkClosed) || err != nil && ctx.Err() != nil {
		return nil, err
	}
	if err != nil {
		// No stream could be opened: the unary receive retries by its
		// rules and reports why it fails.
		return r.receiveUnary(ctx, maxMessages, wait)
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		if r.link.abandon(g) {
			return nil, ctx.Err()
		}
		<-g.done
	}
	if g.broken != nil {
		if e := refusal(g.broken); e != nil {
			return nil, e
		}
		return r.recoverUnknown(ctx, g.id, g.partition, brokenGrant(g, g.broken))
	}
	if info := g.resp.GetError(); info != nil {
		e := errorOfInfo(info, codes.Unknown)
		e.node = g.addr
		switch {
		case e.Code == CodeOutcomeUnknown:
			return r.recoverUnknown(ctx, g.id, g.partition, e)
		case e.Retryable:
			// Nothing was received: the unary receive retries by its
			// rules.
			return r.receiveUnary(ctx, maxMessages, wait)
		}
		return nil, e
	}
	return fromProtoReceivedList(g.resp.GetMessages(), r.path, r.sub, r.session), nil
}

// refusal is the error a stream ended with when the server refused it for
// good (unknown entity, no Listen right, malformed request): no grant of
// it received anything, and none would. Nil for any other end.
func refusal(err error) *Error {
	st, ok := status.FromError(err)
	if !ok || !hasErrorInfo(st) {
		return nil
	}
	var e *Error
	if !errors.As(asError(err), &e) || e.Code == CodeOutcomeUnknown || e.Retryable {
		return nil
	}
	return e
}

// brokenGrant is the unknown outcome of a grant whose stream ended with
// err before its response.
func brokenGrant(g *grant, err error) *Error {
	return &Error{Code: CodeOutcomeUnknown, Retryable: true, Status: status.Code(err), node: g.addr,
		Message: fmt.Sprintf("the receive stream to %s ended before the receive was answered (%v); it may or may not have received", g.addr, err)}
}

// recoverUnknown recovers a receive of unknown outcome as a unary receive
// does: a replay of its receive id returns what it received (repeated by
// the retry rules when it went to one partition; once across partitions).
// A receive still unknown is kept for the next receive to claim.
func (r *Receiver) recoverUnknown(ctx context.Context, id []byte, partition *uint32, unknown *Error) ([]*ReceivedMessage, error) {
	req := replayOf(id, partition, r)
	var resp *raftbusv1.ReceiveResponse
	var err error
	if partition != nil {
		err = r.c.onPartitionAfter(ctx, unknown, r.path, *partition, true, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
			var err error
			resp, err = ms.Receive(ctx, req)
			return err
		})
	} else if resp, err = r.receiveCall(ctx, req); err != nil {
		// The replay failing says nothing of the receive.
		err = unknown
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		r.remember(unclaimedReceive{id: id, partition: partition})
	}
	if err != nil {
		return nil, err
	}
	return fromProtoReceivedList(resp.GetMessages(), r.path, r.sub, r.session), nil
}
