package engine

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

var deterministic = proto.MarshalOptions{Deterministic: true}

// incoming is a sent message checked and encoded, before it is stored.
type incoming struct {
	meta      []byte
	size      int64
	duplicate bool
	// first is the message's first copy when it is a duplicate of one
	// sent earlier; batchFirst the index of its first copy in this batch.
	first       firstCopy
	batchFirst  int
	scheduled   bool
	scheduledMs int64
	ttlMs       int64
}

// send enqueues (or schedules) a batch, all or nothing: every message is
// checked and the quota tested before the first is stored.
// refs, when it has one for each message, says where their bodies lie in
// the log (see ApplyStored).
func (e *Engine) send(now int64, path string, msgs []*raftbusv1.Message, refs []BodyRef, schedule bool) ([]*raftbusv1.SendResult, *Error) {
	ent, err := e.entity(path)
	if err != nil {
		return nil, err
	}
	if ent.subscription != nil {
		return nil, invalidf("%q is a subscription: send to its topic", path)
	}
	s := &ent.settings
	in := make([]incoming, len(msgs))
	var batchIDs map[string]int
	var total int64
	requiresSession := s.requiresSession || ent.subscriptionRequiresSession()
	for i, m := range msgs {
		if requiresSession && m.GetSessionId() == "" {
			return nil, invalidf("message %d: entity %q requires a session_id", i, path)
		}
		meta, merr := encodeMeta(m)
		if merr != nil {
			return nil, invalidf("message %d: %v", i, merr)
		}
		x := &in[i]
		x.meta = meta
		x.size = int64(len(m.GetMessageId()) + len(m.GetBody()) + len(meta))
		if x.size > s.maxMessageSizeBytes {
			return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED,
				"message %d is %d bytes; entity %q accepts at most %d", i, x.size, path, s.maxMessageSizeBytes)
		}
		if id := m.GetMessageId(); s.duplicateDetection && id != "" {
			x.batchFirst = -1
			if first, ok := ent.duplicates.seen(id, now); ok {
				x.duplicate, x.first = true, first
			} else if len(msgs) > 1 {
				if batchIDs == nil {
					batchIDs = make(map[string]int, len(msgs))
				}
				if j, ok := batchIDs[id]; ok {
					x.duplicate, x.batchFirst = true, j
				} else {
					batchIDs[id] = i
				}
			}
		}
		if x.duplicate {
			continue
		}
		total += x.size
		x.ttlMs = s.defaultTTLMs
		if d := m.GetTimeToLive(); d != nil {
			x.ttlMs = min(x.ttlMs, d.AsDuration().Milliseconds())
		}
		if t := m.GetScheduledEnqueueTime(); t != nil {
			x.scheduledMs = timestampMs(t)
			x.scheduled = x.scheduledMs > now
		}
	}
	used := ent.bytes()
	if e.version < versionQuotaCountsSessionState {
		used = ent.messageBytes()
	}
	if total > 0 && used+total > s.maxSizeBytes {
		return nil, errorf(raftbusv1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED,
			"entity %q holds %d bytes; %d more would exceed its limit of %d", path, used, total, s.maxSizeBytes)
	}
	results := make([]*raftbusv1.SendResult, len(msgs))
	blocks := make([]sendBlock, len(msgs))
	for i, m := range msgs {
		x := &in[i]
		r := &blocks[i].r
		r.PartitionId, r.Duplicate, r.Scheduled = e.partitionID, x.duplicate, x.scheduled
		results[i] = r
		if x.duplicate {
			ent.counters.Duplicates++
			// Answered as its first copy was, so that a send repeated after
			// an unknown outcome learns what the first attempt got.
			if x.batchFirst >= 0 {
				first := results[x.batchFirst]
				r.SequenceNumber, r.EnqueuedTime, r.Scheduled = first.SequenceNumber, first.EnqueuedTime, first.Scheduled
			} else if x.first.seq != 0 {
				r.SequenceNumber, r.Scheduled = x.first.seq, x.first.scheduled
				setTimestamp(&blocks[i].enqueued, x.first.enqueuedMs)
				r.EnqueuedTime = &blocks[i].enqueued
			}
			continue
		}
		ent.counters.Sent++
		sm := &message{id: m.GetMessageId(), body: m.GetBody(), meta: x.meta, expiresMs: x.ttlMs}
		if len(refs) == len(msgs) && refs[i].onDisk() && int(refs[i].Length) == len(sm.body) {
			sm.body, sm.ref = nil, refs[i]
		}
		if ent.main.sessions != nil {
			ent.main.sessions.assign(sm, m.GetSessionId())
		}
		if x.scheduled {
			sm.state = stateScheduled
			sm.dueMs = x.scheduledMs
		} else {
			sm.state = stateAvailable
		}
		if ent.topic != nil && !x.scheduled {
			e.publish(ent, sm, m, now)
		} else {
			e.enqueue(ent.main, sm, now)
		}
		r.SequenceNumber = sm.seq
		setTimestamp(&blocks[i].enqueued, sm.enqueuedMs)
		r.EnqueuedTime = &blocks[i].enqueued
		if s.duplicateDetection && m.GetMessageId() != "" {
			ent.duplicates.remember(m.GetMessageId(), firstCopy{
				expiresMs: addMs(now, s.duplicateWindowMs), seq: sm.seq, enqueuedMs: sm.enqueuedMs, scheduled: x.scheduled})
		}
	}
	return results, nil
}

// sendBlock holds one send result, so that a batch of them is a single
// allocation.
type sendBlock struct {
	r        raftbusv1.SendResult
	enqueued timestamppb.Timestamp
}

// enqueue gives m a sequence number and stores it in q. A message that is
// not scheduled is enqueued at now and expires after its time to live.
func (e *Engine) enqueue(q *queue, m *message, now int64) {
	m.seq, m.order = e.sequence()
	m.enqueuedMs = now
	if m.state != stateScheduled && m.expiresMs != noExpiry {
		m.expiresMs = addMs(now, m.expiresMs)
	}
	e.store(q, m)
}

// activate makes a scheduled message visible at its due time t, with a new
// sequence number.
func (e *Engine) activate(q *queue, m *message, t int64) {
	owner := q.sessionOf(m) // the message stays in its session
	q.remove(m)
	q.sessions.reassign(m, owner)
	m.state = stateAvailable
	if q.entity.topic != nil {
		e.publishScheduled(q.entity, m, t)
		return
	}
	e.enqueue(q, m, t)
}

func (e *Engine) cancelScheduled(c *enginev1.CancelScheduled) (int32, *Error) {
	ent, err := e.entity(c.GetEntityPath())
	if err != nil {
		return 0, err
	}
	var n int32
	for _, seq := range c.GetSequenceNumbers() {
		if m := e.lookup(ent.main, seq); m != nil && m.state == stateScheduled {
			ent.main.remove(m)
			n++
		}
	}
	return n, nil
}

// encodeMeta encodes every field of m but message_id and body, or returns
// nil when there are none.
func encodeMeta(m *raftbusv1.Message) ([]byte, error) {
	if m.GetContentType() == "" && m.GetCorrelationId() == "" && m.GetSubject() == "" && m.GetTo() == "" &&
		m.GetReplyTo() == "" && m.GetReplyToSessionId() == "" && m.GetSessionId() == "" && m.GetPartitionKey() == "" &&
		m.GetTimeToLive() == nil && m.GetScheduledEnqueueTime() == nil && len(m.GetApplicationProperties()) == 0 {
		return nil, nil
	}
	if sessionOnly(m) {
		return sessionOnlyMeta(m.GetSessionId()), nil
	}
	meta := &raftbusv1.Message{
		ContentType:          m.GetContentType(),
		CorrelationId:        m.GetCorrelationId(),
		Subject:              m.GetSubject(),
		To:                   m.GetTo(),
		ReplyTo:              m.GetReplyTo(),
		ReplyToSessionId:     m.GetReplyToSessionId(),
		SessionId:            m.GetSessionId(),
		PartitionKey:         m.GetPartitionKey(),
		TimeToLive:           m.GetTimeToLive(),
		ScheduledEnqueueTime: m.GetScheduledEnqueueTime(),
	}
	b, err := deterministic.Marshal(meta)
	if err != nil || len(m.GetApplicationProperties()) == 0 {
		return b, err
	}
	return appendProperties(b, m.GetApplicationProperties())
}

// timestamp converts Unix milliseconds to a protobuf Timestamp.
func timestamp(ms int64) *timestamppb.Timestamp {
	t := &timestamppb.Timestamp{}
	setTimestamp(t, ms)
	return t
}

func setTimestamp(t *timestamppb.Timestamp, ms int64) {
	sec, rem := ms/1000, ms%1000
	if rem < 0 {
		sec, rem = sec-1, rem+1000
	}
	t.Seconds, t.Nanos = sec, int32(rem)*1e6
}

// timestampMs converts a valid Timestamp to Unix milliseconds.
func timestampMs(t *timestamppb.Timestamp) int64 {
	return t.GetSeconds()*1000 + int64(t.GetNanos())/1e6
}
