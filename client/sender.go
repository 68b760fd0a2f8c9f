package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// NewSenderOptions configure a Sender.
type NewSenderOptions struct {
	// MaxInFlight bounds the sends one Sender has on the wire at once,
	// from all goroutines using it and from SendMessages. Default 64.
	MaxInFlight int
}

// Sender sends messages to one queue or topic. It is safe for concurrent
// use: concurrent sends are pipelined over the same connections, up to
// MaxInFlight at once.
//
// Retries: a send that failed because no leader was reachable is retried
// with backoff. A send whose outcome is unknown (the leader changed or the
// connection broke after the request left) is retried only when the entity
// detects duplicates and every message in it has a MessageID: the broker
// then accepts the resend without enqueueing a second copy. Otherwise the
// *Error with CodeOutcomeUnknown goes to the caller, who decides whether a
// duplicate is acceptable.
type Sender struct {
	c        *Client
	path     string
	inFlight chan struct{}
	// sticky is the partition that the next request of messages free to
	// go to any partition goes to; each such request moves it on (see
	// Sender.partition).
	sticky atomic.Uint32
	// singles gathers concurrent SendMessage calls into Send requests.
	singles *coalescer[sendKey, *raftbusv1.PartitionedMessage, *raftbusv1.SendResult]
}

// sendKey is what messages must share to go in one SendEach request: the
// node that leads their partitions ("" when unknown: any node, which
// forwards), or anyPartition: messages free to go to any partition, which
// gather apart and take a partition when their request leaves; and
// whether the request may be repeated after an unknown outcome (see
// Sender.repeatable).
type sendKey struct {
	addr         string
	anyPartition bool
	repeatable   bool
}

// coalescedRequests is how many SendEach requests (or Settle requests) for
// one leader a Sender (or a Client, for settlements) has on the wire at
// once: one being replicated while the next gathers what arrives
// meanwhile.
const coalescedRequests = 2

// NewSender returns a Sender for the queue or topic queueOrTopic.
func (c *Client) NewSender(queueOrTopic string, options *NewSenderOptions) (*Sender, error) {
	if queueOrTopic == "" {
		return nil, &Error{Code: CodeInvalidArgument, Message: "empty queue or topic name"}
	}
	n := 64
	if options != nil && options.MaxInFlight > 0 {
		n = options.MaxInFlight
	}
	s := &Sender{c: c, path: queueOrTopic, inFlight: make(chan struct{}, n)}
	s.singles = newCoalescer(maxBatchMessages, DefaultMaxBatchBytes, coalescedRequests, s.sendCoalesced)
	return s, nil
}

// Close releases the Sender. Sends in progress finish.
func (s *Sender) Close(ctx context.Context) error { return nil }

// SendMessageOptions configure SendMessage.
type SendMessageOptions struct {
	// Result, when set, receives what the broker gave the message: its
	// sequence number, partition and enqueue time (for tests and tools
	// that check ordering; Service Bus senders do not usually need it).
	Result *SendResult
}

// SendResult is what the broker assigned to a sent message.
type SendResult struct {
	SequenceNumber int64
	PartitionID    uint32
	EnqueuedTime   time.Time
	// Duplicate: the MessageID was seen within the duplicate detection
	// window; the message was accepted but not enqueued again, and the
	// other fields are those of its first copy. A send the client repeated
	// after an unknown outcome sees this when the first attempt took
	// effect.
	Duplicate bool
	// Scheduled: the message was scheduled; SequenceNumber is its
	// schedule number.
	Scheduled bool
}

// SendMessage sends one message and returns once the broker has committed
// it on a quorum of replicas. Messages sent concurrently to the same
// leader travel together in one request, each with its own outcome.
func (s *Sender) SendMessage(ctx context.Context, message *Message, options *SendMessageOptions) error {
	pm, err := toProtoMessage(message)
	if err != nil {
		return err
	}
	safe, err := s.repeatable(ctx, []*raftbusv1.Message{pm})
	if err != nil {
		return err
	}
	id, free, err := s.partition(ctx, pm)
	if err != nil {
		return err
	}
	key := sendKey{anyPartition: true, repeatable: safe}
	item := &raftbusv1.PartitionedMessage{Message: pm}
	if !free {
		addr, err := s.c.leaderOf(ctx, s.path, id)
		if err != nil {
			return err
		}
		key, item.PartitionId = sendKey{addr: addr, repeatable: safe}, id
	}
	r, err := s.singles.do(ctx, key, item, proto.Size(item), func(ctxErr error) error {
		return &gaveUpError{ctxErr, &Error{
			Code:      CodeOutcomeUnknown,
			Message:   fmt.Sprintf("%v while the message was being sent; it may or may not have been enqueued", ctxErr),
			Retryable: true,
		}}
	})
	if err != nil {
		return err
	}
	if options != nil && options.Result != nil {
		*options.Result = SendResult{
			SequenceNumber: r.GetSequenceNumber(), PartitionID: r.GetPartitionId(), EnqueuedTime: timeOf(r.GetEnqueuedTime()),
			Duplicate: r.GetDuplicate(), Scheduled: r.GetScheduled(),
		}
	}
	return nil
}

// SendMessages sends each message on its own, pipelined: up to the
// Sender's MaxInFlight are on the wire at once, and SendMessages returns
// when all are answered. Unlike a batch, each message succeeds or fails
// alone; the error joins the failures, each naming its message's index.
func (s *Sender) SendMessages(ctx context.Context, messages []*Message) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, m := range messages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.SendMessage(ctx, m, nil); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("message %d: %w", i, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SendMessageBatchOptions are reserved for future options.
type SendMessageBatchOptions struct{}

// SendMessageBatch sends a batch all or nothing, into one partition.
func (s *Sender) SendMessageBatch(ctx context.Context, batch *MessageBatch, options *SendMessageBatchOptions) error {
	if batch == nil || len(batch.messages) == 0 {
		return &Error{Code: CodeInvalidArgument, Message: "empty message batch"}
	}
	_, err := s.send(ctx, batch.messages)
	return err
}

// ScheduleMessagesOptions are reserved for future options.
type ScheduleMessagesOptions struct{}

// ScheduleMessages schedules messages to become visible at
// scheduledEnqueueTime and returns their sequence numbers, in order, for
// CancelScheduledMessages.
func (s *Sender) ScheduleMessages(ctx context.Context, messages []*Message, scheduledEnqueueTime time.Time, options *ScheduleMessagesOptions) ([]int64, error) {
	if len(messages) == 0 {
		return nil, nil
	}
	// One request per session id or partition key: the broker takes a
	// request's messages into one partition only when they share it.
	type group struct {
		idx  []int
		msgs []*raftbusv1.Message
	}
	groups := map[string]*group{}
	var order []string
	for i, m := range messages {
		pm, err := toProtoMessage(m)
		if err != nil {
			return nil, err
		}
		pm.ScheduledEnqueueTime = timestamppb.New(scheduledEnqueueTime)
		key := keyOf(pm)
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
			order = append(order, key)
		}
		g.idx = append(g.idx, i)
		g.msgs = append(g.msgs, pm)
	}
	seqs := make([]int64, len(messages))
	for _, key := range order {
		g := groups[key]
		id, _, err := s.partition(ctx, g.msgs[0])
		if err != nil {
			return nil, err
		}
		s.sticky.Add(1)
		safe, err := s.repeatable(ctx, g.msgs)
		if err != nil {
			return nil, err
		}
		var resp *raftbusv1.ScheduleResponse
		err = s.withSlot(ctx, func() error {
			return s.c.onPartition(ctx, s.path, id, safe, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
				var err error
				resp, err = ms.Schedule(ctx, &raftbusv1.ScheduleRequest{EntityPath: s.path, Messages: g.msgs, PartitionId: &id})
				return err
			})
		})
		if err != nil {
			return nil, err
		}
		for k, seq := range resp.GetSequenceNumbers() {
			if k < len(g.idx) {
				seqs[g.idx[k]] = seq
			}
		}
	}
	return seqs, nil
}

// CancelScheduledMessagesOptions are reserved for future options.
type CancelScheduledMessagesOptions struct{}

// CancelScheduledMessages removes scheduled messages by the sequence
// numbers ScheduleMessages returned. Numbers already activated or unknown
// are ignored. Safe to retry, and retried.
func (s *Sender) CancelScheduledMessages(ctx context.Context, sequenceNumbers []int64, options *CancelScheduledMessagesOptions) error {
	parts, err := s.c.routes.partitions(ctx, s.path)
	if err != nil {
		return err
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
	for _, id := range order {
		seqs := byPartition[id]
		err := s.c.onPartition(ctx, s.path, id, true, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
			_, err := ms.CancelScheduled(ctx, &raftbusv1.CancelScheduledRequest{EntityPath: s.path, SequenceNumbers: seqs})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// send sends messages that share a partition in one request.
func (s *Sender) send(ctx context.Context, msgs []*raftbusv1.Message) (*raftbusv1.SendResponse, error) {
	id, free, err := s.partition(ctx, msgs[0])
	if err != nil {
		return nil, err
	}
	s.sticky.Add(1)
	safe, err := s.repeatable(ctx, msgs)
	if err != nil {
		return nil, err
	}
	return s.sendTo(ctx, id, free, safe, msgs)
}

// sendTo sends msgs to partition id in one request; free: they may go to
// any partition, and id only names the node to serve them (which checks
// that each of them may); safe: the request may be repeated after an
// unknown outcome.
func (s *Sender) sendTo(ctx context.Context, id uint32, free, safe bool, msgs []*raftbusv1.Message) (*raftbusv1.SendResponse, error) {
	var resp *raftbusv1.SendResponse
	err := s.withSlot(ctx, func() error {
		return s.c.onPartition(ctx, s.path, id, safe, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
			var err error
			resp, err = ms.Send(ctx, &raftbusv1.SendRequest{EntityPath: s.path, Messages: msgs, PartitionId: &id, AnyPartition: free})
			return err
		})
	})
	if err == nil && len(resp.GetResults()) != len(msgs) {
		// The broker took the request: what it did is not known.
		return nil, &Error{Code: CodeOutcomeUnknown, Message: fmt.Sprintf("the broker answered %d results for %d messages; they may or may not have been enqueued", len(resp.GetResults()), len(msgs))}
	}
	return resp, err
}

// sendCoalesced sends the messages of concurrent SendMessage calls bound
// for one leader in one SendEach request, once. When the request as a
// whole fails, or a message fails for a reason a retry can get past (its
// partition's leader moved), each message goes on alone under the retry
// policy of Client.retry (which knows when an unknown outcome may be
// repeated and when a deadline is the caller's), so that one caller's
// trouble holds up no other.
func (s *Sender) sendCoalesced(ctx context.Context, key sendKey, calls []*call[*raftbusv1.PartitionedMessage, *raftbusv1.SendResult]) {
	if key.anyPartition {
		// They all go to the partition of the moment, in one entry.
		id, addr, err := s.takeSticky(ctx)
		if err != nil {
			for _, c := range calls {
				c.err = err
			}
			return
		}
		for _, c := range calls {
			c.item.PartitionId, c.item.AnyPartition = id, true
		}
		key.addr = addr
	}
	req := &raftbusv1.SendEachRequest{EntityPath: s.path, Messages: make([]*raftbusv1.PartitionedMessage, len(calls))}
	for i, c := range calls {
		req.Messages[i] = c.item
	}
	var resp *raftbusv1.SendEachResponse
	var addr string
	err := s.withSlot(ctx, func() error {
		var err error
		addr, err = s.c.onNode(ctx, key.addr, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
			var err error
			resp, err = ms.SendEach(ctx, req)
			if err == nil && len(resp.GetResults()) != len(calls) {
				err = status.Errorf(codes.Internal, "the broker answered %d results for %d messages", len(resp.GetResults()), len(calls))
			}
			return err
		})
		return err
	})
	var wg sync.WaitGroup
	for i, c := range calls {
		failure := err
		if err == nil {
			r := resp.GetResults()[i]
			if r.GetError() == nil {
				c.res = r.GetResult()
				continue
			}
			e := errorOfInfo(r.GetError(), codes.Unknown)
			e.node = addr
			failure = e
		}
		var e *Error
		if !errors.As(failure, &e) || (err == nil && !e.Retryable) {
			c.err = failure
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.res, c.err = s.sendAlone(c.ctx, c.item, key.repeatable, e)
		}()
	}
	wg.Wait()
}

// sendAlone retries one message whose first attempt failed with first.
func (s *Sender) sendAlone(ctx context.Context, pm *raftbusv1.PartitionedMessage, safe bool, first *Error) (*raftbusv1.SendResult, error) {
	var res *raftbusv1.SendResult
	err := s.withSlot(ctx, func() error {
		return s.c.onPartitionAfter(ctx, first, s.path, pm.GetPartitionId(), safe, func(ctx context.Context, ms raftbusv1.MessagingServiceClient) error {
			id := pm.GetPartitionId()
			resp, err := ms.Send(ctx, &raftbusv1.SendRequest{EntityPath: s.path, Messages: []*raftbusv1.Message{pm.GetMessage()}, PartitionId: &id})
			if err != nil {
				return err
			}
			if len(resp.GetResults()) != 1 {
				return status.Errorf(codes.Internal, "the broker answered %d results for 1 message", len(resp.GetResults()))
			}
			res = resp.GetResults()[0]
			return nil
		})
	})
	return res, err
}

// withSlot runs f holding one of the Sender's in-flight slots.
func (s *Sender) withSlot(ctx context.Context, f func() error) error {
	select {
	case s.inFlight <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.inFlight }()
	return f()
}

// takeSticky returns the partition of the moment and the address of its
// leader ("" when unknown), and moves the partition of the moment on.
func (s *Sender) takeSticky(ctx context.Context) (uint32, string, error) {
	rt, err := s.c.routes.route(ctx, s.path)
	if err != nil {
		return 0, "", err
	}
	parts := uint32(max(len(rt.leaders), 1))
	id := (s.sticky.Add(1) - 1) % parts
	addr, err := s.c.leaderOf(ctx, s.path, id)
	return id, addr, err
}

// partition picks the partition of a message: its session id's or
// partition key's, else, when the entity detects duplicates, its
// MessageId's (as Service Bus does), else the partition of the moment,
// and then the message is free to go to any partition (free).
func (s *Sender) partition(ctx context.Context, m *raftbusv1.Message) (id uint32, free bool, err error) {
	rt, err := s.c.routes.route(ctx, s.path)
	if err != nil {
		return 0, false, err
	}
	parts := uint32(len(rt.leaders))
	if parts <= 1 {
		return 0, false, nil
	}
	if key := keyOf(m); key != "" {
		return raftbusv1.PartitionForKey(key, parts), false, nil
	}
	// Duplicate detection is kept per partition: a message sent again
	// after an unknown outcome must go where the first attempt went.
	if id := m.GetMessageId(); id != "" && rt.duplicateDetection {
		return raftbusv1.PartitionForKey(id, parts), false, nil
	}
	// Any partition will do. If each message took a partition of its
	// own, a request of n messages would become up to n Raft entries,
	// each paying for its own log writes and round trips. So a request
	// (a gathered SendEach, a batch, a schedule) goes to the partition of
	// the moment as a whole and moves that on to the next: its messages
	// share an entry, and the requests spread over the partitions'
	// leaders. Sends and batches say the messages may go anywhere, and
	// the node serving them puts them on its own partition of the moment,
	// where other senders' requests meet them in one entry.
	//
	// Single sends free to go anywhere gather in a queue of their own
	// while that queue's requests are on the wire, and take their
	// partition only when their request leaves (see sendCoalesced): had
	// they taken it when sent, they would have gathered per leader node,
	// and each move of the partition of the moment to another node would
	// start a request there with the first message to come.
	return s.sticky.Load() % parts, true, nil
}

func keyOf(m *raftbusv1.Message) string {
	if m.GetSessionId() != "" {
		return m.GetSessionId()
	}
	return m.GetPartitionKey()
}

// repeatable tells whether a send of msgs may be repeated after an unknown
// outcome: only when the entity detects duplicates and every message has a
// MessageID, so that the broker drops the repeat of one that took effect.
func (s *Sender) repeatable(ctx context.Context, msgs []*raftbusv1.Message) (bool, error) {
	if !allHaveIDs(msgs) {
		return false, nil
	}
	rt, err := s.c.routes.route(ctx, s.path)
	if err != nil {
		return false, err
	}
	return rt.duplicateDetection, nil
}

// allHaveIDs tells whether every message of msgs has a MessageID.
func allHaveIDs(msgs []*raftbusv1.Message) bool {
	for _, m := range msgs {
		if m.GetMessageId() == "" {
			return false
		}
	}
	return true
}
