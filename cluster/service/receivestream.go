package service

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A ReceiveStream is a series of Receives that share their entity,
// sub-queue, mode, partition and session (the stream's open request):
// each grant of credit is served as the unary Receive with the grant's
// receive id would be, through the same interceptors (see
// ServeGrantsThrough), so a grant is locked, removed, forwarded, bounded,
// authorized and fails exactly as that Receive. A stream that breaks thus
// leaves nothing a Receive would not have left: the client replays each
// grant it got no response for, by its receive id.

// ServeGrantsThrough makes every grant of a ReceiveStream pass through
// intercept (the node's unary interceptors, chained) as a unary Receive
// does: the access guard, the call bounds, metrics and status mapping see
// each grant as the Receive it is. Without it grants go straight to
// Receive (tests of this package).
func (s *Messaging) ServeGrantsThrough(intercept grpc.UnaryServerInterceptor) {
	info := &grpc.UnaryServerInfo{Server: s, FullMethod: raftbusv1.MessagingService_Receive_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return s.Receive(ctx, req.(*raftbusv1.ReceiveRequest))
	}
	s.grant = func(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error) {
		resp, err := intercept(ctx, req, info, handler)
		if err != nil {
			return nil, err
		}
		return resp.(*raftbusv1.ReceiveResponse), nil
	}
}

// EndStreamsWhen makes every ReceiveStream end once end is closed (the
// node shuts down), between two grants, with SERVER_BUSY: a stream that
// would otherwise stay open with no grant keeps a graceful stop waiting,
// and its client recovers the grants it had made and opens its next
// stream at another node.
func (s *Messaging) EndStreamsWhen(end <-chan struct{}) { s.streamsEnd = end }

// serveGrant serves one grant as a unary Receive.
func (s *Messaging) serveGrant(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error) {
	if s.grant != nil {
		return s.grant(ctx, req)
	}
	return s.Receive(ctx, req)
}

// ReceiveStream serves MessagingService.ReceiveStream: it checks the open
// request, then serves the grants as they arrive, at once, as concurrent
// Receive calls are served (their locks go into shared log entries), and
// answers each when it is done. Served one after the other, the grants
// of a receiver shared by many goroutines would wait for each other's
// log commits; answered in order, a message a later grant took would
// wait, locked, behind an earlier grant still waiting for messages.
func (s *Messaging) ReceiveStream(stream raftbusv1.MessagingService_ReceiveStreamServer) error {
	return apierror.Status(s.receiveStream(stream))
}

func (s *Messaging) receiveStream(stream raftbusv1.MessagingService_ReceiveStreamServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return endOfStream(err)
	}
	open := first.GetOpen()
	if open == nil {
		return apierror.Invalid("the first request of a ReceiveStream must be open")
	}
	if err := s.checkOpen(ctx, open); err != nil {
		return err
	}
	grants := make(chan arrivedGrant, grantBacklog)
	go readGrants(ctx, stream, grants)

	// Grants in service; on an error the stream ends with, those still
	// served are cut short (their outcome unknown to the client, which
	// replays them) and the stream ends once they are answered.
	serveCtx, cancel := context.WithCancel(ctx)
	var serving sync.WaitGroup
	defer func() {
		cancel()
		serving.Wait()
	}()
	slots := make(chan struct{}, grantBacklog)
	var sendMu sync.Mutex
	sendFailed := make(chan error, 1)
	for {
		var g arrivedGrant
		var ok bool
		select {
		case g, ok = <-grants:
		case <-s.streamsEnd:
			return apierror.Busy("the node at %s is shutting down: receive at another", s.node.Addr())
		case err := <-sendFailed:
			return err
		}
		switch {
		case !ok:
			// The client closed its side: the grants in service are
			// answered, then the stream ends.
			serving.Wait()
			select {
			case err := <-sendFailed:
				return err
			default:
				return nil
			}
		case g.err != nil:
			return g.err
		}
		select {
		case slots <- struct{}{}:
		case <-s.streamsEnd:
			return apierror.Busy("the node at %s is shutting down: receive at another", s.node.Addr())
		case err := <-sendFailed:
			return err
		}
		serving.Add(1)
		go func() {
			defer serving.Done()
			defer func() { <-slots }()
			resp := s.answerGrant(serveCtx, open, g)
			sendMu.Lock()
			err := stream.Send(resp)
			sendMu.Unlock()
			if err != nil {
				select {
				case sendFailed <- err:
				default:
				}
			}
		}()
	}
}

// grantBacklog is how many grants a stream serves at once and reads
// ahead; beyond it the client's sends wait (flow control).
const grantBacklog = 64

// arrivedGrant is a grant read off a stream and when, or why the stream
// ended (err; nil when the client closed its side).
type arrivedGrant struct {
	credit  *raftbusv1.ReceiveCredit
	arrived time.Time
	err     error
}

// readGrants reads the grants of stream into grants until it ends, then
// closes grants, after an arrivedGrant with the error that ended it (none
// when the client closed its side).
func readGrants(ctx context.Context, stream raftbusv1.MessagingService_ReceiveStreamServer, grants chan<- arrivedGrant) {
	defer close(grants)
	for {
		g := arrivedGrant{}
		req, err := stream.Recv()
		switch {
		case err != nil:
			g.err = endOfStream(err)
		case req.GetCredit() == nil:
			g.err = apierror.Invalid("a ReceiveStream is opened once: every request after the first must be credit")
		case len(req.GetCredit().GetReceiveId()) == 0:
			g.err = apierror.Invalid("credit needs a receive_id, the client's to replay the grant with")
		default:
			g.credit, g.arrived = req.GetCredit(), time.Now()
		}
		if g.err == nil && err != nil {
			return // the client closed its side: the grants read are served
		}
		select {
		case grants <- g:
		case <-ctx.Done():
			return
		}
		if g.err != nil {
			return
		}
	}
}

// endOfStream is nil when the client closed its side of the stream, the
// error of the stream otherwise.
func endOfStream(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// answerGrant serves credit as a Receive with the fields of open and
// returns its response: the messages, or the error Receive would have
// returned.
func (s *Messaging) answerGrant(ctx context.Context, open *raftbusv1.ReceiveStreamOpen, g arrivedGrant) *raftbusv1.ReceiveStreamResponse {
	credit := g.credit
	resp, err := s.serveGrant(ctx, grantRequest(open, credit, time.Since(g.arrived)))
	if err != nil {
		return &raftbusv1.ReceiveStreamResponse{ReceiveId: credit.GetReceiveId(), Error: apierror.Info(err)}
	}
	return &raftbusv1.ReceiveStreamResponse{ReceiveId: credit.GetReceiveId(), Messages: resp.GetMessages()}
}

// grantRequest is the unary Receive a grant stands for, served waited
// after the grant arrived: its wait is what is left of max_wait (a
// max_wait Receive refuses is left for it to refuse).
func grantRequest(open *raftbusv1.ReceiveStreamOpen, credit *raftbusv1.ReceiveCredit, waited time.Duration) *raftbusv1.ReceiveRequest {
	wait := credit.GetMaxWait()
	if w, err := waitTime(wait); err == nil && w > 0 {
		wait = durationpb.New(max(w-waited, 0))
	}
	return &raftbusv1.ReceiveRequest{
		EntityPath:  open.GetEntityPath(),
		SubQueue:    open.GetSubQueue(),
		ReceiveMode: open.GetReceiveMode(),
		PartitionId: open.PartitionId,
		Session:     open.GetSession(),
		ReceiveId:   credit.GetReceiveId(),
		MaxMessages: credit.GetMaxMessages(),
		MaxWait:     wait,
	}
}

// checkOpen refuses a stream whose receives would all fail as Receive
// checks them before receiving: an unknown entity (NOT_FOUND), a session
// entity without a session, a session not held or in another partition.
// A grant is checked again as it is served (the entity may go meanwhile).
func (s *Messaging) checkOpen(ctx context.Context, open *raftbusv1.ReceiveStreamOpen) error {
	if open.GetSession() == nil {
		t, err := resolve(ctx, s.node, open.GetEntityPath())
		if err != nil {
			return err
		}
		if t.requiresSession() && open.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER {
			return apierror.Invalid("%q requires sessions: accept a session and receive from it", t.path)
		}
		return nil
	}
	t, err := s.sessionEntity(ctx, open.GetEntityPath())
	if err != nil {
		return err
	}
	if open.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED {
		return apierror.Invalid("the dead-letter sub-queue is received without a session")
	}
	id, err := heldSession(t.entity, open.GetSession())
	if err != nil {
		return err
	}
	if open.PartitionId != nil && open.GetPartitionId() != id {
		return apierror.Invalid("session %q lives in partition %d, not %d", open.GetSession().GetSessionId(), id, open.GetPartitionId())
	}
	return nil
}
