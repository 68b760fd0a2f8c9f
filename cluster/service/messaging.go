package service

import (
	"context"
	"crypto/rand"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const (
	// MaxBatch bounds the messages of one receive, peek or send, and
	// the settlements of one Settle.
	MaxBatch = 1000
	// maxWait bounds a receive's long poll.
	maxWait = 5 * time.Minute
	// maxReceiveID bounds a receive id (the engine's limit).
	maxReceiveID = 64
	// pollSlice is how long a receive across partitions waits on one
	// source (this node's partitions, another node's, a partition whose
	// leader is unknown) before it looks at the next.
	pollSlice = 50 * time.Millisecond
	// LocalLead is how much longer a message elsewhere may have waited
	// than the oldest at the partitions this node leads before a receive
	// across partitions goes there first (see Messaging.sources): going
	// to another node for a message only a little older costs every
	// message it takes a hop, while a node that fewer receivers reach
	// falls behind by about this much at most.
	LocalLead = 50 * time.Millisecond
	// MaxReceiveBytes bounds the messages one partition hands out for a
	// receive, a deferred receive or a peek, as the engine counts them (an
	// upper bound of their encoding; the first message is handed out
	// whatever its size, and is at most about 1 MiB). The bound travels in
	// the command, so every replica stops at the same message and a
	// receipt keeps no more. An answer thus stays far below
	// cluster.MaxMessageBytes, the gRPC limit of each hop (client to node,
	// node to leader) and of the SDK: a deferred receive across partitions
	// carries at most twice this, a receive and a peek at most this
	// (package cluster checks that this fits).
	MaxReceiveBytes = 4 << 20
)

// Messaging implements raftbus.v1.MessagingService: each call is routed
// to the leader of the partition concerned, turned into one engine
// command there, and its result mapped back.
type Messaging struct {
	raftbusv1.UnimplementedMessagingServiceServer
	node Node
	rr   roundRobin
	// placed are the node's partitions of the moment for messages free to
	// go to any partition.
	placed placements
	// grant serves one grant of a ReceiveStream as a unary Receive (see
	// ServeGrantsThrough); nil: Receive itself.
	grant func(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error)
	// streamsEnd, once closed, ends the ReceiveStreams between their
	// grants (see EndStreamsWhen); nil: never.
	streamsEnd <-chan struct{}
}

// NewMessaging is the messaging service of node.
func NewMessaging(node Node) *Messaging { return &Messaging{node: node} }

// roundRobin spreads sends without a partition key and the starting
// partition of receives.
type roundRobin struct{ next atomic.Uint32 }

func (r *roundRobin) pick(n uint32) uint32 { return r.next.Add(1) % n }

func (s *Messaging) Send(ctx context.Context, req *raftbusv1.SendRequest) (*raftbusv1.SendResponse, error) {
	e, id, err := s.sendTarget(ctx, req.GetEntityPath(), req.GetMessages(), req.PartitionId)
	if err != nil {
		return nil, err
	}
	if req.GetAnyPartition() && !slices.ContainsFunc(req.GetMessages(), func(m *raftbusv1.Message) bool { return !anywhere(e, m) }) {
		if placed, ok := s.place(e, len(req.GetMessages())); ok {
			id = placed
		}
	}
	return route(ctx, s.node, e, id, sendRepeat(e, req.GetMessages()), func(r Replica) (*raftbusv1.SendResponse, error) {
		res, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: e.GetName(), Messages: req.GetMessages()}}})
		if err != nil {
			return nil, err
		}
		return &raftbusv1.SendResponse{Results: res.GetSend().GetMessages()}, nil
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.SendResponse, error) {
		fwd := proto.Clone(req).(*raftbusv1.SendRequest)
		fwd.PartitionId, fwd.AnyPartition = &id, false
		return raftbusv1.NewMessagingServiceClient(conn).Send(ctx, fwd)
	})
}

func (s *Messaging) Schedule(ctx context.Context, req *raftbusv1.ScheduleRequest) (*raftbusv1.ScheduleResponse, error) {
	for i, m := range req.GetMessages() {
		if m.GetScheduledEnqueueTime() == nil {
			return nil, apierror.Invalid("message %d has no scheduled_enqueue_time", i)
		}
	}
	e, id, err := s.sendTarget(ctx, req.GetEntityPath(), req.GetMessages(), req.PartitionId)
	if err != nil {
		return nil, err
	}
	return route(ctx, s.node, e, id, sendRepeat(e, req.GetMessages()), func(r Replica) (*raftbusv1.ScheduleResponse, error) {
		res, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_Schedule{Schedule: &enginev1.Schedule{EntityPath: e.GetName(), Messages: req.GetMessages()}}})
		if err != nil {
			return nil, err
		}
		resp := &raftbusv1.ScheduleResponse{}
		for _, m := range res.GetSchedule().GetMessages() {
			resp.SequenceNumbers = append(resp.SequenceNumbers, m.GetSequenceNumber())
		}
		return resp, nil
	}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.ScheduleResponse, error) {
		fwd := proto.Clone(req).(*raftbusv1.ScheduleRequest)
		fwd.PartitionId = &id
		return raftbusv1.NewMessagingServiceClient(conn).Schedule(ctx, fwd)
	})
}

// sendRepeat says whether a send may be repeated after an unknown outcome:
// when every message has a MessageId and the entity detects duplicates, a
// repeat of one that took effect is accepted as a duplicate and stores
// nothing.
func sendRepeat(e *clusterv1.Entity, msgs []*raftbusv1.Message) routing.Repeat {
	if !(e.GetQueue().GetRequiresDuplicateDetection() || e.GetTopic().GetRequiresDuplicateDetection()) {
		return routing.Once
	}
	for _, m := range msgs {
		if m.GetMessageId() == "" {
			return routing.Once
		}
	}
	return routing.Idempotent
}

// sendTarget validates a send and picks its partition: the request's, else
// the one of the messages' session id or partition key, else (one message)
// its MessageId's, else the next in turn.
func (s *Messaging) sendTarget(ctx context.Context, path string, msgs []*raftbusv1.Message, requested *uint32) (e *clusterv1.Entity, id uint32, err error) {
	if len(msgs) == 0 || len(msgs) > MaxBatch {
		return nil, 0, apierror.Invalid("a send carries 1 to %d messages, not %d", MaxBatch, len(msgs))
	}
	ent, err := s.sendable(ctx, path)
	if err != nil {
		return nil, 0, err
	}
	id, err = s.sendPartition(ent, msgs, requested)
	return ent, id, err
}

// sendPartition checks that msgs may go together and picks their
// partition (see sendTarget).
func (s *Messaging) sendPartition(ent *clusterv1.Entity, msgs []*raftbusv1.Message, requested *uint32) (uint32, error) {
	parts := uint32(len(ent.GetPartitions()))
	key := ""
	for i, m := range msgs {
		k := m.GetSessionId()
		if k == "" {
			k = m.GetPartitionKey()
		} else if pk := m.GetPartitionKey(); pk != "" && pk != k {
			return 0, apierror.Invalid("message %d: partition_key %q must equal session_id %q", i, pk, k)
		}
		if i > 0 && k != key {
			return 0, apierror.Invalid("the messages of one send must share their session id and partition key (message %d differs)", i)
		}
		key = k
	}
	switch {
	case requested != nil:
		id := *requested
		if key != "" && parts > 1 && raftbusv1.PartitionForKey(key, parts) != id {
			return 0, apierror.Invalid("partition_id %d is not the partition of key %q (%d)", id, key, raftbusv1.PartitionForKey(key, parts))
		}
		return id, nil
	case key != "":
		return raftbusv1.PartitionForKey(key, parts), nil
	case len(msgs) == 1 && msgs[0].GetMessageId() != "":
		// Duplicate detection is kept per partition: the same message sent
		// again must meet its first copy.
		return raftbusv1.PartitionForKey(msgs[0].GetMessageId(), parts), nil
	}
	return s.rr.pick(parts), nil
}

// anywhere tells whether m may go to any partition of e: it has no
// session id or partition key, and e does not detect duplicates by its
// MessageId (that is kept per partition, so a resend must meet its first
// copy).
func anywhere(e *clusterv1.Entity, m *raftbusv1.Message) bool {
	if m.GetSessionId() != "" || m.GetPartitionKey() != "" {
		return false
	}
	dedup := e.GetQueue().GetRequiresDuplicateDetection() || e.GetTopic().GetRequiresDuplicateDetection()
	return !dedup || m.GetMessageId() == ""
}

// place is the partition of e that n messages free to go anywhere go to
// (see placements), and false when there are none, e has one partition,
// or this node leads none of its partitions: then each keeps the
// partition its sender named, served at that partition's leader.
func (s *Messaging) place(e *clusterv1.Entity, n int) (uint32, bool) {
	if n == 0 || len(e.GetPartitions()) < 2 {
		return 0, false
	}
	return s.placed.place(e, n, func(id uint32) bool {
		r := s.node.Replica(e, id)
		return r != nil && r.IsLeader() && r.Ready()
	})
}

func (s *Messaging) CancelScheduled(ctx context.Context, req *raftbusv1.CancelScheduledRequest) (*raftbusv1.CancelScheduledResponse, error) {
	e, err := s.sendable(ctx, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	groups := bySequencePartition(e, req.GetSequenceNumbers())
	for _, id := range sortedKeys(groups) {
		seqs := groups[id]
		_, err := route(ctx, s.node, e, id, routing.Idempotent, func(r Replica) (*raftbusv1.CancelScheduledResponse, error) {
			_, err := r.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_CancelScheduled{CancelScheduled: &enginev1.CancelScheduled{EntityPath: e.GetName(), SequenceNumbers: seqs}}})
			return &raftbusv1.CancelScheduledResponse{}, err
		}, func(ctx context.Context, conn grpc.ClientConnInterface) (*raftbusv1.CancelScheduledResponse, error) {
			return raftbusv1.NewMessagingServiceClient(conn).CancelScheduled(ctx, &raftbusv1.CancelScheduledRequest{EntityPath: e.GetName(), SequenceNumbers: seqs})
		})
		if err != nil {
			return nil, err
		}
	}
	return &raftbusv1.CancelScheduledResponse{}, nil
}

// bySequencePartition groups sequence numbers by the partition their top
// 16 bits name (all in partition 0 for an unpartitioned entity). Numbers of
// partitions the entity does not have go to that partition id anyway, so
// that routing rejects them.
func bySequencePartition(e *clusterv1.Entity, seqs []int64) map[uint32][]int64 {
	out := make(map[uint32][]int64)
	for _, seq := range seqs {
		var id uint32
		if len(e.GetPartitions()) > 1 {
			id = raftbusv1.PartitionOfSequence(seq)
		}
		out[id] = append(out[id], seq)
	}
	return out
}

func (s *Messaging) Receive(ctx context.Context, req *raftbusv1.ReceiveRequest) (*raftbusv1.ReceiveResponse, error) {
	receiveID, err := receiveIDOf(req.GetReceiveId(), req.GetReplay())
	if err != nil {
		return nil, err
	}
	if req.GetSession() != nil {
		return s.receiveSession(ctx, req, receiveID)
	}
	t, err := resolve(ctx, s.node, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	e := t.entity
	if t.requiresSession() && req.GetSubQueue() != raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER {
		return nil, apierror.Invalid("%q requires sessions: accept a session and receive from it", t.path)
	}
	batch, err := batchSize(req.GetMaxMessages())
	if err != nil {
		return nil, err
	}
	wait, err := waitTime(req.GetMaxWait())
	if err != nil {
		return nil, err
	}
	lock := &enginev1.Lock{EntityPath: t.path, SubQueue: req.GetSubQueue(), ReceiveMode: req.GetReceiveMode(), MaxMessages: batch,
		MaxBytes: MaxReceiveBytes, ReceiveId: receiveID, Replay: req.GetReplay()}
	if req.GetReplay() {
		return s.replay(ctx, e, lock, req.PartitionId)
	}
	if req.PartitionId != nil {
		msgs, err := s.receiveFrom(ctx, e, req.GetPartitionId(), lock, wait)
		return &raftbusv1.ReceiveResponse{Messages: msgs}, err
	}
	msgs, err := s.receiveAcross(ctx, e, lock, wait)
	return &raftbusv1.ReceiveResponse{Messages: msgs}, err
}

// receiveIDOf is the receive id a request carries, checked, or a new one
// for this node's own repeats of the request (see Node.Route).
func receiveIDOf(id []byte, replay bool) ([]byte, error) {
	switch {
	case len(id) > maxReceiveID:
		return nil, apierror.Invalid("receive_id must be at most %d bytes, not %d", maxReceiveID, len(id))
	case len(id) > 0:
		return id, nil
	case replay:
		return nil, apierror.Invalid("replay needs the receive_id of the receive to replay")
	}
	id = make([]byte, 16)
	rand.Read(id)
	return id, nil
}

// replay collects what earlier receives with lock's receive id received,
// from partition only, or from every partition of e. Each partition that
// received nothing for the id keeps an empty receipt, so that such a
// receive still under way receives nothing when it is applied. The
// partitions that received for the id received no more together than the
// receive's bounds (a receive across partitions gathers within them from
// the partitions of the first node that has messages, and stops there;
// replays receive nothing new), so the answer is no larger than that
// receive's. A partition whose receipt lost its locks (see engine's
// repeat) makes the whole answer MESSAGE_LOCK_LOST, once every partition
// has been read: the receive delivered messages nobody will see, and the
// others must still be fenced.
func (s *Messaging) replay(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, only *uint32) (*raftbusv1.ReceiveResponse, error) {
	first, last := uint32(0), uint32(len(e.GetPartitions()))
	if only != nil {
		first, last = *only, *only+1
	}
	resp := &raftbusv1.ReceiveResponse{}
	var lost error
	for id := first; id < last; id++ {
		msgs, err := s.receiveFrom(ctx, e, id, lock, 0)
		switch {
		case err != nil && apierror.From(err).Reason == raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST:
			lost = err
		case err != nil:
			return nil, err
		}
		resp.Messages = append(resp.Messages, msgs...)
	}
	if lost != nil {
		return nil, lost
	}
	return resp, nil
}

// receiveFrom receives from one partition, waiting up to wait.
func (s *Messaging) receiveFrom(ctx context.Context, e *clusterv1.Entity, id uint32, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	return route(ctx, s.node, e, id, routing.Idempotent, func(r Replica) ([]*raftbusv1.ReceivedMessage, error) {
		return r.Receive(ctx, lock, wait)
	}, func(ctx context.Context, conn grpc.ClientConnInterface) ([]*raftbusv1.ReceivedMessage, error) {
		req := receiveRequest(lock, wait)
		req.PartitionId = &id
		resp, err := raftbusv1.NewMessagingServiceClient(conn).Receive(ctx, req)
		return resp.GetMessages(), err
	})
}

// receiveRequest asks another node to receive what lock does, waiting up
// to wait.
func receiveRequest(lock *enginev1.Lock, wait time.Duration) *raftbusv1.ReceiveRequest {
	return &raftbusv1.ReceiveRequest{
		EntityPath:  lock.GetEntityPath(),
		SubQueue:    lock.GetSubQueue(),
		ReceiveMode: lock.GetReceiveMode(),
		MaxMessages: lock.GetMaxMessages(),
		MaxWait:     durationpb.New(wait),
		Session:     sessionLockOf(lock),
		ReceiveId:   lock.GetReceiveId(),
		Replay:      lock.GetReplay(),
	}
}

func batchSize(n int32) (int32, error) {
	switch {
	case n == 0:
		return 1, nil
	case n < 0 || n > MaxBatch:
		return 0, apierror.Invalid("max_messages must be between 1 and %d, not %d", MaxBatch, n)
	}
	return n, nil
}

func waitTime(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, apierror.Invalid("max_wait: %v", err)
	}
	w := d.AsDuration()
	if w < 0 || w > maxWait {
		return 0, apierror.Invalid("max_wait must be between 0 and %v, not %v", maxWait, w)
	}
	return w, nil
}

// sendable finds the queue or topic a send names.
func (s *Messaging) sendable(ctx context.Context, path string) (*clusterv1.Entity, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if _, _, ok := meta.SplitSubscriptionPath(path); ok {
		return nil, apierror.Invalid("%q is a subscription: send to its topic", path)
	}
	return s.node.Entity(ctx, path)
}
