package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// appendPipeline is the client side of one AppendEntriesPipeline stream: one
// per (peer, group) pipeline raft opens. Requests are sent as raft hands them
// over; a receiving goroutine matches the answers, which come back in
// request order, to the futures and hands those to raft on Consumer.
type appendPipeline struct {
	trans   *GroupTransport
	target  raft.ServerAddress
	timeout time.Duration
	stream  grpc.BidiStreamingClient[raftv1.AppendEntriesPipelineRequest, raftv1.AppendEntriesPipelineResponse]
	// cancel aborts the stream: on Close, or when a send or an answer takes
	// longer than the timeout (like the I/O deadlines of raft's
	// NetworkTransport, this breaks the pipeline and raft falls back).
	cancel context.CancelFunc

	// sendMu keeps the order of inflight the order of the stream.
	sendMu sync.Mutex
	// inflight holds the futures sent and not yet answered but the one the
	// receiver waits on: its capacity of MaxInFlight-1 bounds the requests in
	// flight to MaxInFlight, AppendEntries blocking beyond.
	inflight chan *appendFuture
	// budget bounds the bytes of the requests in flight: raft reads the
	// entries of every request it pipelines into memory, and holds them
	// until the answer.
	budget *byteBudget
	doneCh chan raft.AppendFuture

	closeOnce    sync.Once
	shutdownCh   chan struct{}
	receiverDone chan struct{}
}

// AppendEntriesPipeline opens a pipeline of AppendEntries requests to target.
func (t *GroupTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.openPipeline(id, target)
	if err != nil {
		return nil, fmt.Errorf("raftgrpc: open append pipeline to %s (group %s): %w", target, t.group, err)
	}
	return p, nil
}

func (t *GroupTransport) openPipeline(id raft.ServerID, target raft.ServerAddress) (*appendPipeline, error) {
	if t.ctx.Err() != nil {
		return nil, ErrClosed
	}
	c, err := t.mux.client(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(t.ctx)
	// Opening the stream waits for the connection; bound that wait too.
	watchdog := time.AfterFunc(t.mux.timeout, cancel)
	stream, err := c.AppendEntriesPipeline(t.mux.withIdentity(ctx, id))
	if !watchdog.Stop() && err == nil {
		err = fmt.Errorf("open stream: no connection after %s", t.mux.timeout)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	p := &appendPipeline{
		trans:        t,
		target:       target,
		timeout:      t.mux.timeout,
		stream:       stream,
		cancel:       cancel,
		inflight:     make(chan *appendFuture, t.mux.maxInFlight-1),
		budget:       newByteBudget(t.mux.maxInFlightBytes),
		doneCh:       make(chan raft.AppendFuture, t.mux.maxInFlight),
		shutdownCh:   make(chan struct{}),
		receiverDone: make(chan struct{}),
	}
	if err := t.trackPipeline(p); err != nil {
		cancel()
		return nil, err
	}
	go p.receiveAnswers()
	return p, nil
}

// AppendEntries sends one more request down the pipeline. It blocks while
// the pipeline has its maximum of requests, or of bytes, in flight.
func (p *appendPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	future := newAppendFuture(args, resp)
	msg := &raftv1.AppendEntriesPipelineRequest{Request: appendEntriesRequestToProto(p.trans.group, args)}
	future.size = proto.Size(msg)

	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	select {
	case <-p.shutdownCh:
		return nil, raft.ErrPipelineShutdown
	default:
	}
	if !p.budget.acquire(future.size) {
		return nil, raft.ErrPipelineShutdown
	}
	// The future is queued before its request is sent, so that the
	// receiver knows it before the answer can arrive.
	select {
	case p.inflight <- future:
	case <-p.shutdownCh:
		p.budget.release(future.size)
		return nil, raft.ErrPipelineShutdown
	}
	watchdog := time.AfterFunc(p.timeout, p.cancel)
	err := p.stream.Send(msg)
	watchdog.Stop()
	if errors.Is(err, io.EOF) {
		// The stream ended (the peer refused it, or went away): its status
		// comes from the receiving side, which answers the queued future
		// with it. Report that, not a bare EOF.
		select {
		case <-future.done:
			if future.err != nil {
				p.cancel()
				return nil, future.err
			}
		case <-p.shutdownCh:
		}
	}
	if err != nil {
		// The queued future fails on the receiver's side as the stream is
		// aborted; raft stops using this pipeline on this error.
		p.cancel()
		return nil, fmt.Errorf("raftgrpc: pipeline append entries to %s (group %s): %w", p.target, p.trans.group, err)
	}
	return future, nil
}

// Consumer delivers the futures of the requests in the order they were sent,
// once answered.
func (p *appendPipeline) Consumer() <-chan raft.AppendFuture { return p.doneCh }

// Close aborts the stream and waits for the receiving goroutine to end.
// Requests still in flight get no answer.
func (p *appendPipeline) Close() error {
	p.closeOnce.Do(func() {
		close(p.shutdownCh)
		p.budget.close()
		p.cancel()
		<-p.receiverDone
		p.trans.untrackPipeline(p)
	})
	return nil
}

// receiveAnswers reads the answers and completes the futures in order. Once
// the stream has failed every Recv fails at once, so the futures still in
// flight fail quickly with the stream's error.
func (p *appendPipeline) receiveAnswers() {
	defer close(p.receiverDone)
	for {
		var future *appendFuture
		select {
		case future = <-p.inflight:
		case <-p.shutdownCh:
			return
		}
		watchdog := time.AfterFunc(p.timeout, p.cancel)
		msg, err := p.stream.Recv()
		watchdog.Stop()
		future.respond(p.answer(future, msg, err))
		p.budget.release(future.size)
		select {
		case p.doneCh <- future:
		case <-p.shutdownCh:
			return
		}
	}
}

// answer fills the future's response from msg and returns the error the
// future completes with.
func (p *appendPipeline) answer(future *appendFuture, msg *raftv1.AppendEntriesPipelineResponse, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("raftgrpc: pipeline append entries to %s (group %s): %w", p.target, p.trans.group, err)
	case msg.GetError() != "":
		return fmt.Errorf("raftgrpc: pipeline append entries to %s (group %s): remote: %s", p.target, p.trans.group, msg.GetError())
	case msg.GetResponse() == nil:
		return fmt.Errorf("raftgrpc: pipeline append entries to %s (group %s): %w: answer without response", p.target, p.trans.group, errUnexpectedMessage)
	}
	*future.resp = appendEntriesResponseFromProto(msg.GetResponse())
	return nil
}

// appendFuture implements raft.AppendFuture for pipelined requests.
type appendFuture struct {
	size  int // of the encoded request
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	done  chan struct{}
}

func newAppendFuture(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) *appendFuture {
	return &appendFuture{start: time.Now(), args: args, resp: resp, done: make(chan struct{})}
}

func (f *appendFuture) respond(err error) {
	f.err = err
	close(f.done)
}

// Error blocks until the request is answered.
func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// byteBudget bounds the bytes of the requests a pipeline has in flight. A
// request is always let through when none is in flight, so that one larger
// than the budget is sent alone rather than never.
type byteBudget struct {
	mu     sync.Mutex
	freed  *sync.Cond
	used   int
	limit  int
	closed bool
}

func newByteBudget(limit int) *byteBudget {
	b := &byteBudget{limit: limit}
	b.freed = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n bytes fit in the budget and takes them; it returns
// false, taking nothing, once the budget is closed.
func (b *byteBudget) acquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.used > 0 && b.used+n > b.limit {
		b.freed.Wait()
	}
	if b.closed {
		return false
	}
	b.used += n
	return true
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.freed.Broadcast()
}

// close fails every acquire, waiting or to come.
func (b *byteBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.freed.Broadcast()
}
