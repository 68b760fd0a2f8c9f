package client

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// ReceiveMode chooses how a Receiver takes messages.
type ReceiveMode int

const (
	// ReceiveModePeekLock locks received messages; settle each with
	// CompleteMessage, AbandonMessage, DeadLetterMessage or DeferMessage
	// before its lock expires.
	ReceiveModePeekLock ReceiveMode = iota
	// ReceiveModeReceiveAndDelete removes messages as they are received:
	// at most once delivery.
	ReceiveModeReceiveAndDelete
)

// SubQueue selects a sub-queue of an entity.
type SubQueue int

const (
	// SubQueueNone is the entity itself.
	SubQueueNone SubQueue = iota
	// SubQueueDeadLetter is the entity's dead-letter sub-queue.
	SubQueueDeadLetter
)

// ReceiverOptions configure a Receiver.
type ReceiverOptions struct {
	ReceiveMode ReceiveMode
	SubQueue    SubQueue
}

// Receiver receives and settles the messages of a queue or subscription.
// It is safe for concurrent use.
type Receiver struct {
	c       *Client
	path    string
	mode    raftbusv1.ReceiveMode
	sub     raftbusv1.SubQueue
	session *raftbusv1.SessionLock // set for a SessionReceiver
	// sessionPartition is the partition of the held session.
	sessionPartition uint32
	// nextPeek continues PeekMessages where the previous one ended.
	nextPeek atomic.Int64

	// unclaimed holds receives whose outcome stayed unknown (the client
	// gave up repeating them): what they may have taken is handed out by
	// the next ReceiveMessages or ReceiveDeferredMessages, not lost to
	// this receiver (removed in ReceiveAndDelete mode, or locked until the
	// lock expires, a delivery counted that nobody saw).
	mu        sync.Mutex
	unclaimed []unclaimedReceive
	// unclaimedDeferred maps the sequence numbers a deferred receive of
	// unknown outcome asked for to its receive id.
	unclaimedDeferred map[int64][]byte

	// link is the ReceiveStream the receives of a Receiver (not a
	// SessionReceiver) go on.
	link receiveLink
}

// unclaimedReceive is a receive of unknown outcome: its receive id and,
// when it went to one partition, which.
type unclaimedReceive struct {
	id        []byte
	partition *uint32
}

// NewReceiverForQueue returns a Receiver for a queue.
func (c *Client) NewReceiverForQueue(queue string, options *ReceiverOptions) (*Receiver, error) {
	return c.newReceiver(queue, options)
}

// NewReceiverForSubscription returns a Receiver for a topic's
// subscription.
func (c *Client) NewReceiverForSubscription(topic, subscription string, options *ReceiverOptions) (*Receiver, error) {
	return c.newReceiver(subscriptionPath(topic, subscription), options)
}

func subscriptionPath(topic, subscription string) string {
	return topic + "/subscriptions/" + subscription
}

func (c *Client) newReceiver(path string, options *ReceiverOptions) (*Receiver, error) {
	if path == "" {
		return nil, &Error{Code: CodeInvalidArgument, Message: "empty entity name"}
	}
	r := &Receiver{c: c, path: path, mode: raftbusv1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK}
	r.link.r = r
	if options != nil {
		if options.ReceiveMode == ReceiveModeReceiveAndDelete {
			r.mode = raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE
		}
		if options.SubQueue == SubQueueDeadLetter {
			r.sub = raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER
		}
	}
	return r, nil
}

// Close releases the Receiver: it closes its receive stream (a receive
// under way recovers what it received). Locks it holds expire on their
// own.
func (r *Receiver) Close(ctx context.Context) error {
	r.link.close(false)
	return nil
}

// ReceiveMessagesOptions configure ReceiveMessages.
type ReceiveMessagesOptions struct {
	// MaxWaitTime bounds the wait for the first message; then
	// ReceiveMessages returns what it has, possibly nothing. Zero: wait
	// until a message arrives or ctx ends.
	MaxWaitTime time.Duration
}

// longPoll is the longest single wait asked of the server.
const longPoll = 60 * time.Second

// ReceiveMessages receives up to maxMessages (1 to 1000), blocking until
// at least one arrives, options.MaxWaitTime passes, or ctx ends. It
// returns what arrived; when ctx ends with nothing received it returns
// ctx's error. A receive hands out at most 4 MiB of messages (and at least
// one message, whatever its size): when the messages available add up to
// more, it returns fewer than maxMessages and the others stay available.
//
// A receive whose answer was lost is repeated, and gets the messages it
// took. When the repeat comes after their locks ended (a failover that
// outlasted the lock duration), the messages were delivered unseen, their
// delivery counts raised, and are available to receive again: the caller
// hears CodeOutcomeUnknown, as when the repeats fail.
func (r *Receiver) ReceiveMessages(ctx context.Context, maxMessages int, options *ReceiveMessagesOptions) ([]*ReceivedMessage, error) {
	var deadline time.Time
	if options != nil && options.MaxWaitTime > 0 {
		deadline = time.Now().Add(options.MaxWaitTime)
	}
	for {
		wait := longPoll
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		if d, ok := ctx.Deadline(); ok {
			// Ask for an answer a little before the caller gives up.
			wait = min(wait, time.Until(d)-100*time.Millisecond)
		}
		msgs, err := r.receiveOnce(ctx, maxMessages, max(wait, 0))
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) <= 100*time.Millisecond {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
}

// receiveOnce hands out what earlier receives left unclaimed, else
// receives once: on the receive stream, or for a SessionReceiver, whose
// session lock the stream would have to follow, with a unary Receive.
func (r *Receiver) receiveOnce(ctx context.Context, maxMessages int, wait time.Duration) ([]*ReceivedMessage, error) {
	if msgs, err := r.claim(ctx); err != nil || len(msgs) > 0 {
		return msgs, err
	}
	if r.session != nil {
		return r.receiveUnary(ctx, maxMessages, wait)
	}
	return r.receiveGranted(ctx, maxMessages, wait)
}

// receiveUnary receives once with a unary Receive.
func (r *Receiver) receiveUnary(ctx context.Context, maxMessages int, wait time.Duration) ([]*ReceivedMessage, error) {
	// The receive id makes the request safe to repeat after an unknown
	// outcome: a partition that received for it answers a repeat with the
	// same messages (still locked, or the ones it removed) instead of more.
	req := &raftbusv1.ReceiveRequest{
		EntityPath: r.path, SubQueue: r.sub, ReceiveMode: r.mode,
		MaxMessages: int32(maxMessages), MaxWait: durationpb.New(wait), Session: r.session,
		ReceiveId: newReceiveID(),
	}
	id, one, err := r.partitionOfReceive(ctx)
	if err != nil {
		return nil, err
	}
	var resp *raftbusv1.ReceiveResponse
	if one {
		req.PartitionId = &id
		resp, err = r.receiveCall(ctx, req)
	} else {
		// Across partitions a repeat could start at another partition and
		// receive there, leaving the first attempt's messages unseen. So
		// after an unknown outcome the client asks every partition only
		// for what it received under this id (a replay, which also keeps
		// the first attempt from receiving if it is still under way).
		resp, err = r.receiveCall(ctx, req)
		if unknown := err; errors.Is(unknown, ErrOutcomeUnknown) {
			if resp, err = r.receiveCall(ctx, replayOf(req.GetReceiveId(), nil, r)); err != nil {
				// The replay failing says nothing of the receive.
				err = unknown
			}
		}
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		r.remember(unclaimedReceive{id: req.GetReceiveId(), partition: req.PartitionId})
	}
	if err != nil {
		return nil, err
	}
	return fromProtoReceivedList(resp.GetMessages(), r.path, r.sub, r.session), nil
}

// receiveCall sends req to its partition, or to any node when it spans
// partitions. It is repeated after an unknown outcome when it goes to one
// partition or is a replay: with its receive id, a repeat gets what the
// first attempt received. A receive across partitions is not: a repeat
// could receive at another partition than the first attempt did.
func (r *Receiver) receiveCall(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error) {
	var resp *raftbusv1.ReceiveResponse
	call := func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		var err error
		resp, err = ms.Receive(ctx, req)
		return err
	}
	var err error
	if req.PartitionId != nil {
		err = r.c.onPartition(ctx, r.path, *req.PartitionId, true, call)
	} else {
		err = r.c.onAnyNode(ctx, req.GetReplay(), call)
	}
	return resp, err
}

// replayOf asks for what the receive with id received, and nothing new.
func replayOf(id []byte, partition *uint32, r *Receiver) *raftbusv1.ReceiveRequest {
	return &raftbusv1.ReceiveRequest{
		EntityPath: r.path, SubQueue: r.sub, ReceiveMode: r.mode, Session: r.session,
		ReceiveId: id, Replay: true, PartitionId: partition,
	}
}

// remember keeps a receive of unknown outcome for the next receive to claim.
func (r *Receiver) remember(u unclaimedReceive) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unclaimed = append(r.unclaimed, u)
}

// claim replays the receives of unknown outcome until one gives messages,
// dropping each that gives none (it took nothing, or its receipt expired)
// or whose locks ended unseen (MESSAGE_LOCK_LOST, a failure of that
// receive, not of the caller's). One that fails and may succeed later
// stays for the next receive.
func (r *Receiver) claim(ctx context.Context) ([]*ReceivedMessage, error) {
	for {
		r.mu.Lock()
		if len(r.unclaimed) == 0 {
			r.mu.Unlock()
			return nil, nil
		}
		u := r.unclaimed[0]
		r.unclaimed = r.unclaimed[1:]
		r.mu.Unlock()
		resp, err := r.receiveCall(ctx, replayOf(u.id, u.partition, r))
		if locksLost(err) {
			continue
		}
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Retryable || ctx.Err() != nil {
				r.remember(u)
			}
			return nil, err
		}
		if msgs := resp.GetMessages(); len(msgs) > 0 {
			return fromProtoReceivedList(msgs, r.path, r.sub, r.session), nil
		}
	}
}

// locksLost reports whether err says that a repeated receive took effect
// and the locks it took ended before its answer arrived.
func locksLost(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeLockLost
}

// newReceiveID is a receive id for one receive request and its repeats.
func newReceiveID() []byte {
	id := make([]byte, 16)
	rand.Read(id)
	return id
}

// partitionOfReceive tells whether the receive goes to one partition (the
// session's, or the only one) and which.
func (r *Receiver) partitionOfReceive(ctx context.Context) (uint32, bool, error) {
	if r.session != nil {
		return r.sessionPartition, true, nil
	}
	parts, err := r.c.routes.partitions(ctx, routeKey(r.path))
	if err != nil {
		return 0, false, err
	}
	return 0, parts == 1, nil
}

// PeekMessagesOptions configure PeekMessages.
type PeekMessagesOptions struct {
	// FromSequenceNumber starts the peek here (inclusive). Nil: after the
	// last message the previous PeekMessages returned.
	FromSequenceNumber *int64
}

// PeekMessages returns up to maxMessages messages without locking them:
// active, locked, deferred and scheduled ones, in sequence order. Like a
// receive it returns at most 4 MiB of messages; the next PeekMessages
// continues after the last one returned.
func (r *Receiver) PeekMessages(ctx context.Context, maxMessages int, options *PeekMessagesOptions) ([]*ReceivedMessage, error) {
	from := r.nextPeek.Load()
	if options != nil && options.FromSequenceNumber != nil {
		from = *options.FromSequenceNumber
	}
	req := &raftbusv1.PeekRequest{EntityPath: r.path, SubQueue: r.sub, FromSequenceNumber: from, MaxMessages: int32(maxMessages)}
	var resp *raftbusv1.PeekResponse
	call := func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
		var err error
		resp, err = ms.Peek(ctx, req)
		return err
	}
	var err error
	if r.session != nil {
		req.SessionId = r.session.GetSessionId()
		req.PartitionId = &r.sessionPartition
		err = r.c.onPartition(ctx, r.path, r.sessionPartition, true, call)
	} else {
		err = r.c.onAnyNode(ctx, true, call)
	}
	if err != nil {
		return nil, err
	}
	msgs := fromProtoReceivedList(resp.GetMessages(), r.path, r.sub, r.session)
	if len(msgs) > 0 {
		r.nextPeek.Store(msgs[len(msgs)-1].SequenceNumber + 1)
	}
	return msgs, nil
}

// ReceiveDeferredMessagesOptions are reserved for future options.
type ReceiveDeferredMessagesOptions struct{}

// ReceiveDeferredMessages receives deferred messages by sequence number
// (in the Receiver's mode). It fails with CodeNotFound when a number is not
// a deferred message, returning the messages received before (of other
// partitions). The server hands out at most 4 MiB of messages per
// request, so when they add up to more it asks again for the rest.
func (r *Receiver) ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *ReceiveDeferredMessagesOptions) ([]*ReceivedMessage, error) {
	parts, err := r.c.routes.partitions(ctx, routeKey(r.path))
	if err != nil {
		return nil, err
	}
	byPartition := map[uint32][]int64{}
	var order []uint32
	for _, seq := range sequenceNumbers {
		id := uint32(0)
		if parts > 1 {
			id = raftbusv1.PartitionOfSequence(seq)
		}
		if _, ok := byPartition[id]; !ok {
			order = append(order, id)
		}
		byPartition[id] = append(byPartition[id], seq)
	}
	var out []*ReceivedMessage
	for _, id := range order {
		for pending := byPartition[id]; len(pending) > 0; {
			// Safe to repeat with its receive id, as a receive is. A
			// number an earlier call received with an unknown outcome is
			// asked for again under that call's id, which gets what it
			// received.
			req := &raftbusv1.ReceiveDeferredRequest{EntityPath: r.path, SubQueue: r.sub, ReceiveMode: r.mode, SequenceNumbers: pending, Session: r.session,
				ReceiveId: r.deferredReceiveID(pending)}
			var resp *raftbusv1.ReceiveDeferredResponse
			err := r.c.onPartition(ctx, r.path, id, true, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
				var err error
				resp, err = ms.ReceiveDeferred(ctx, req)
				return err
			})
			r.settleDeferredReceive(req, err)
			if err != nil {
				return out, err
			}
			if len(resp.GetMessages()) == 0 {
				break
			}
			out = append(out, fromProtoReceivedList(resp.GetMessages(), r.path, r.sub, r.session)...)
			pending = notReceived(pending, resp.GetMessages())
		}
	}
	return out, nil
}

// deferredReceiveID is the receive id of an earlier deferred receive of
// unknown outcome that asked for one of seqs, else a new one.
func (r *Receiver) deferredReceiveID(seqs []int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, seq := range seqs {
		if id, ok := r.unclaimedDeferred[seq]; ok {
			return id
		}
	}
	return newReceiveID()
}

// settleDeferredReceive remembers the numbers of a deferred receive whose
// outcome is unknown under its receive id, or forgets the id once a
// receive under it was answered.
func (r *Receiver) settleDeferredReceive(req *raftbusv1.ReceiveDeferredRequest, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		if r.unclaimedDeferred == nil {
			r.unclaimedDeferred = make(map[int64][]byte)
		}
		for _, seq := range req.GetSequenceNumbers() {
			r.unclaimedDeferred[seq] = req.GetReceiveId()
		}
	case err == nil:
		for seq, id := range r.unclaimedDeferred {
			if string(id) == string(req.GetReceiveId()) {
				delete(r.unclaimedDeferred, seq)
			}
		}
	}
}

// notReceived is seqs without the sequence numbers of got.
func notReceived(seqs []int64, got []*raftbusv1.ReceivedMessage) []int64 {
	done := make(map[int64]bool, len(got))
	for _, m := range got {
		done[m.GetSequenceNumber()] = true
	}
	var rest []int64
	for _, seq := range seqs {
		if !done[seq] {
			rest = append(rest, seq)
		}
	}
	return rest
}
