package engine

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// snapshotVersion is the version of the snapshot encoding this package
// writes and reads.
const snapshotVersion = 1

// maxRecordSize bounds one snapshot record: a message of the largest size
// an entity may accept, with room to spare.
const maxRecordSize = 256 << 20

var recordWriter = protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}

// Snapshot writes the whole state as a stream of length-delimited
// enginev1.SnapshotRecord messages (see snapshot.proto). The encoding is
// canonical: the same state always gives the same bytes.
func (e *Engine) Snapshot(w io.Writer) error { return e.Capture().Encode(w) }

// An Image is the engine's state at one point of its log, to be encoded
// later. Capture takes it while the engine is held, in the time it takes
// to list the state (under 20 ms for 100,000 queued 1 KiB messages, where
// encoding them into memory took up to a few hundred); Encode writes it
// afterwards, while commands apply again. An image shares with the engine
// only what the engine never changes in place (bodies, properties, ids):
// what it does change, such as a message's lock token, is copied.
type Image struct {
	records []*enginev1.SnapshotRecord
}

// Capture takes the image of the state, for Encode or Digest once the
// engine may change again.
func (e *Engine) Capture() *Image {
	// The message records, most of an image, come from slabs, not three
	// allocations each.
	n := 0
	for _, ent := range e.sorted {
		n += ent.main.all.Len() + ent.deadLetter.all.Len()
	}
	records := make([]enginev1.SnapshotRecord, n)
	wrappers := make([]enginev1.SnapshotRecord_Message, n)
	stored := make([]enginev1.StoredMessage, n)
	im := &Image{records: make([]*enginev1.SnapshotRecord, 0, n+2*len(e.sorted)+2)}
	put := func(r *enginev1.SnapshotRecord) { im.records = append(im.records, r) }
	var entities, messages uint64
	bodies := sharedBodies{}
	put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Header{Header: &enginev1.SnapshotHeader{
		Version: snapshotVersion, PartitionId: e.partitionID, PartitionCount: e.partitionCount,
		NextOrder: e.nextOrder, NowUnixMs: e.now, Generations: e.snapshotGenerations(), NextTransfer: e.nextTransfer,
	}}})
	for _, ent := range e.sorted {
		entities++
		put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Entity{Entity: &enginev1.SnapshotEntity{
			Configuration: ent.configuration(),
		}}})
		for _, q := range [2]*queue{ent.main, ent.deadLetter} {
			q.all.ascend(0, func(m *message) bool {
				s := &stored[messages]
				storeMessage(s, q, m)
				if x := e.transfers.byMessage[m]; x != nil {
					s.State, s.TransferNumber, s.TransferTo = enginev1.StoredState_STORED_STATE_TRANSFER, x.number, x.to
				}
				w, r := &wrappers[messages], &records[messages]
				w.Message = bodies.stored(s, ent, m)
				r.Record = w
				put(r)
				messages++
				return true
			})
		}
		ent.duplicates.live(e.now, func(id string, c firstCopy) {
			put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_DuplicateId{DuplicateId: &enginev1.DuplicateId{
				MessageId: id, ExpiresUnixMs: c.expiresMs,
				SequenceNumber: c.seq, EnqueuedUnixMs: c.enqueuedMs, Scheduled: c.scheduled,
			}}})
		})
		for _, s := range storedSessions(ent.main.sessions) {
			put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Session{Session: s}})
		}
		for _, m := range ent.transferMarks() {
			put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_TransferMark{TransferMark: m}})
		}
	}
	for _, r := range e.receipts.live() {
		put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Receipt{Receipt: storedReceipt(r)}})
	}
	for _, s := range e.settled.live() {
		put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_SettledLock{SettledLock: storedSettled(s)}})
	}
	for _, c := range e.transfers.claims() {
		put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_TransferClaim{TransferClaim: c}})
	}
	put(&enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Trailer{Trailer: &enginev1.SnapshotTrailer{
		EntityCount: entities, MessageCount: messages,
	}}})
	return im
}

// Encode writes the image as Snapshot does. It may run while the engine
// it was captured from applies commands, and more than once.
func (im *Image) Encode(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, r := range im.records {
		if _, err := recordWriter.MarshalTo(bw, r); err != nil {
			return fmt.Errorf("engine snapshot: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("engine snapshot: %w", err)
	}
	return nil
}

// Digest is a SHA-256 over the image's encoding (see Engine.Digest), with
// each body written as its length: a replica that holds a body in memory
// and one that refers to it in its log hold the same state.
func (im *Image) Digest() [32]byte {
	h := sha256.New()
	canonical := &Image{records: make([]*enginev1.SnapshotRecord, len(im.records))}
	for i, r := range im.records {
		canonical.records[i] = bodiesAsLengths(r)
	}
	if err := canonical.Encode(h); err != nil {
		// Only encoding can fail, and every stored string is checked to be
		// valid UTF-8 before it is stored.
		panic(err)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// bodiesAsLengths is r with every body it holds or refers to replaced by
// a reference of the body's length alone.
func bodiesAsLengths(r *enginev1.SnapshotRecord) *enginev1.SnapshotRecord {
	asLength := func(body []byte, ref *enginev1.BodyRef) *enginev1.BodyRef {
		if n := uint32(len(body)) + ref.GetLength(); n > 0 {
			return &enginev1.BodyRef{Length: n}
		}
		return nil
	}
	switch x := r.GetRecord().(type) {
	case *enginev1.SnapshotRecord_Message:
		m := proto.Clone(x.Message).(*enginev1.StoredMessage)
		m.Body, m.BodyRef = nil, asLength(m.Body, m.BodyRef)
		return &enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Message{Message: m}}
	case *enginev1.SnapshotRecord_Receipt:
		rc := proto.Clone(x.Receipt).(*enginev1.Receipt)
		refs := rc.RemovedBodyRefs
		rc.RemovedBodyRefs = nil
		for i, m := range rc.Removed {
			var ref *enginev1.BodyRef
			if i < len(refs) {
				ref = refs[i]
			}
			if m.GetMessage() != nil {
				rc.RemovedBodyRefs = append(rc.RemovedBodyRefs, &enginev1.BodyRef{Length: uint32(len(m.Message.Body)) + ref.GetLength()})
				m.Message.Body = nil
			}
		}
		return &enginev1.SnapshotRecord{Record: &enginev1.SnapshotRecord_Receipt{Receipt: rc}}
	}
	return r
}

// Digest is a SHA-256 over the canonical encoding of the state: replicas
// that applied the same commands have the same digest.
func (e *Engine) Digest() [32]byte { return e.Capture().Digest() }

// storeMessage fills s, a zero StoredMessage, with m of q.
func storeMessage(s *enginev1.StoredMessage, q *queue, m *message) {
	s.SequenceNumber, s.Order, s.EnqueuedUnixMs, s.ExpiresUnixMs = m.seq, m.order, m.enqueuedMs, m.expiresMs
	s.MessageId, s.Body, s.Meta, s.DeliveryCount = m.id, m.body, m.meta, m.deliveryCount
	if m.ref.onDisk() {
		s.BodyRef = m.ref.stored()
	}
	if q.deadLetter {
		s.SubQueue = raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER
	}
	switch m.state {
	case stateAvailable:
		s.State = enginev1.StoredState_STORED_STATE_AVAILABLE
	case stateLocked:
		s.State = enginev1.StoredState_STORED_STATE_LOCKED
		s.DueUnixMs = m.dueMs
		s.LockToken = slices.Clone(m.token[:]) // m.token changes with the next lock
		s.LockedFromDeferred = m.lockedFromDeferred
		s.UnderSessionLock = m.underSessionLock
	case stateDeferred:
		s.State = enginev1.StoredState_STORED_STATE_DEFERRED
	case stateScheduled:
		s.State = enginev1.StoredState_STORED_STATE_SCHEDULED
		s.DueUnixMs = m.dueMs
	}
	if q.sessions != nil {
		if tok, ok := q.sessions.lostBy[m]; ok {
			s.SessionLostLockToken = tok[:]
		}
	}
	if dl := m.deadLetter; dl != nil {
		s.DeadLetterReason, s.DeadLetterErrorDescription = dl.reason, dl.description
		s.DeadLetterSource, s.EnqueuedSequenceNumber = dl.source, dl.enqueuedSeq
	}
}

// Restore replaces the whole state with the one a Snapshot wrote. On error
// the state is left as it was.
func (e *Engine) Restore(r io.Reader) error {
	fresh, err := restore(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return fmt.Errorf("engine restore: %w", err)
	}
	*e = *fresh
	return nil
}

func restore(r *bufio.Reader) (*Engine, error) {
	in := protodelim.UnmarshalOptions{MaxSize: maxRecordSize}
	next := func() (*enginev1.SnapshotRecord, error) {
		rec := &enginev1.SnapshotRecord{}
		if err := in.UnmarshalFrom(r, rec); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("truncated: no trailer")
			}
			return nil, err
		}
		return rec, nil
	}
	rec, err := next()
	if err != nil {
		return nil, err
	}
	h := rec.GetHeader()
	if h == nil {
		return nil, errors.New("the first record is not a header")
	}
	if h.GetVersion() != snapshotVersion {
		return nil, fmt.Errorf("unsupported snapshot version %d (this build reads %d)", h.GetVersion(), snapshotVersion)
	}
	e := New(h.GetPartitionId(), h.GetPartitionCount())
	e.nextOrder, e.now = h.GetNextOrder(), h.GetNowUnixMs()
	e.nextTransfer = max(h.GetNextTransfer(), 1)
	if err := e.restoreGenerations(h.GetGenerations()); err != nil {
		return nil, err
	}
	var ent *entity
	var entities, messages uint64
	bodies := sharedBodies{}
	for {
		if rec, err = next(); err != nil {
			return nil, err
		}
		switch x := rec.GetRecord().(type) {
		case *enginev1.SnapshotRecord_Entity:
			c := x.Entity.GetConfiguration()
			if err := checkPath(c.GetEntityPath()); err != nil {
				return nil, err
			}
			if n := len(e.sorted); n > 0 && e.sorted[n-1].path >= c.GetEntityPath() {
				return nil, fmt.Errorf("entity %q is out of order", c.GetEntityPath())
			}
			if err := e.configure(c); err != nil {
				return nil, fmt.Errorf("entity %q: %w", c.GetEntityPath(), err)
			}
			ent = e.entities[c.GetEntityPath()]
			entities++
		case *enginev1.SnapshotRecord_Message:
			if ent == nil {
				return nil, errors.New("a message record before any entity")
			}
			if err := e.restoreMessage(ent, x.Message, bodies); err != nil {
				return nil, fmt.Errorf("entity %q, message %d: %w", ent.path, x.Message.GetSequenceNumber(), err)
			}
			messages++
		case *enginev1.SnapshotRecord_DuplicateId:
			if ent == nil {
				return nil, errors.New("a duplicate id record before any entity")
			}
			d := x.DuplicateId
			ent.duplicates.remember(d.GetMessageId(), firstCopy{
				expiresMs: d.GetExpiresUnixMs(), seq: d.GetSequenceNumber(), enqueuedMs: d.GetEnqueuedUnixMs(), scheduled: d.GetScheduled()})
		case *enginev1.SnapshotRecord_Session:
			if ent == nil {
				return nil, errors.New("a session record before any entity")
			}
			if err := e.restoreSession(ent, x.Session); err != nil {
				return nil, fmt.Errorf("entity %q, session %q: %w", ent.path, x.Session.GetSessionId(), err)
			}
		case *enginev1.SnapshotRecord_TransferMark:
			if ent == nil {
				return nil, errors.New("a transfer mark before any entity")
			}
			m := x.TransferMark
			ent.restoreMark(m.GetStream(), streamMark{number: m.GetNumber(), acceptedMs: m.GetAcceptedUnixMs()})
		case *enginev1.SnapshotRecord_TransferClaim:
			// After every message: a claim names a target messages are in
			// transfer to.
			c := x.TransferClaim
			if e.transfers.byTarget[c.GetTarget()] == nil {
				return nil, fmt.Errorf("a transfer claim for %q, to which no message is in transfer", c.GetTarget())
			}
			e.transfers.claimed[c.GetTarget()] = c.GetUpTo()
		case *enginev1.SnapshotRecord_Receipt:
			if err := e.restoreReceipt(x.Receipt); err != nil {
				return nil, fmt.Errorf("receipt of %q: %w", x.Receipt.GetEntityPath(), err)
			}
		case *enginev1.SnapshotRecord_SettledLock:
			if err := e.restoreSettled(x.SettledLock); err != nil {
				return nil, fmt.Errorf("settlement in %q: %w", x.SettledLock.GetEntityPath(), err)
			}
		case *enginev1.SnapshotRecord_Trailer:
			if x.Trailer.GetEntityCount() != entities || x.Trailer.GetMessageCount() != messages {
				return nil, fmt.Errorf("trailer counts %d entities and %d messages, read %d and %d",
					x.Trailer.GetEntityCount(), x.Trailer.GetMessageCount(), entities, messages)
			}
			if err := e.checkSessionLocks(); err != nil {
				return nil, err
			}
			e.transfers.sort() // read entity by entity
			return e, nil
		default:
			return nil, fmt.Errorf("unexpected record %T", x)
		}
	}
}

func (e *Engine) restoreMessage(ent *entity, s *enginev1.StoredMessage, bodies sharedBodies) error {
	q, qerr := ent.queue(s.GetSubQueue())
	if qerr != nil {
		return qerr
	}
	if s.GetOrder() <= q.all.lastOrder() && q.all.Len() > 0 {
		return errors.New("messages out of order")
	}
	if s.GetOrder() >= e.nextOrder {
		return fmt.Errorf("order %d not below the next order %d", s.GetOrder(), e.nextOrder)
	}
	var meta raftbusv1.Message
	if s.GetMeta() != nil {
		if err := proto.Unmarshal(s.GetMeta(), &meta); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
	}
	m := &message{
		seq: s.GetSequenceNumber(), order: s.GetOrder(), enqueuedMs: s.GetEnqueuedUnixMs(),
		expiresMs: s.GetExpiresUnixMs(), dueMs: s.GetDueUnixMs(), id: s.GetMessageId(),
		body: s.GetBody(), meta: s.GetMeta(), deliveryCount: s.GetDeliveryCount(),
	}
	if ref := bodyRefOf(s.GetBodyRef()); ref.onDisk() {
		if len(m.body) > 0 {
			return errors.New("a body both stored and referenced")
		}
		m.ref = ref
	}
	if len(m.meta) == 0 {
		m.meta = nil
	}
	inTransfer := s.GetState() == enginev1.StoredState_STORED_STATE_TRANSFER
	if q.sessions != nil && !inTransfer {
		if err := checkSessionID(meta.GetSessionId()); err != nil {
			return fmt.Errorf("a message of a session entity: %w", err)
		}
		q.sessions.assign(m, meta.GetSessionId())
	}
	switch s.GetState() {
	case enginev1.StoredState_STORED_STATE_AVAILABLE:
		m.state = stateAvailable
	case enginev1.StoredState_STORED_STATE_LOCKED:
		m.state = stateLocked
		if len(s.GetLockToken()) != len(m.token) {
			return errors.New("locked without a lock token")
		}
		m.token = lockToken(s.GetLockToken())
		if _, taken := q.locks[m.token]; taken || m.token == (lockToken{}) {
			return errors.New("lock token is zero or stored twice")
		}
		m.lockedFromDeferred = s.GetLockedFromDeferred()
		if m.underSessionLock = s.GetUnderSessionLock(); m.underSessionLock && q.sessions == nil {
			return errors.New("locked under a session lock outside a session")
		}
	case enginev1.StoredState_STORED_STATE_DEFERRED:
		m.state = stateDeferred
	case enginev1.StoredState_STORED_STATE_SCHEDULED:
		if q.deadLetter {
			return errors.New("scheduled in a dead-letter sub-queue")
		}
		m.state = stateScheduled
	case enginev1.StoredState_STORED_STATE_TRANSFER:
		n := s.GetTransferNumber()
		if n == 0 || n >= e.nextTransfer || e.transfers.byNumber[n] != nil || s.GetTransferTo() == "" {
			return fmt.Errorf("transfer number %d out of place (next %d) or no target", n, e.nextTransfer)
		}
		m.state = stateTransfer
	default:
		return fmt.Errorf("unknown state %d", int32(s.GetState()))
	}
	if q.deadLetter {
		m.deadLetter = &deadLetterInfo{
			reason: s.GetDeadLetterReason(), description: s.GetDeadLetterErrorDescription(),
			source: s.GetDeadLetterSource(), enqueuedSeq: s.GetEnqueuedSequenceNumber(),
		}
	}
	if err := bodies.restore(ent, m, s.GetOriginOrder()); err != nil {
		return err
	}
	q.insert(m)
	if inTransfer {
		e.transfers.add(&transfer{number: s.GetTransferNumber(), to: s.GetTransferTo(), q: q, m: m})
	}
	if tok := s.GetSessionLostLockToken(); len(tok) > 0 {
		if q.sessions == nil || m.state == stateLocked || len(tok) != len(lockToken{}) || q.sessions.lost[lockToken(tok)] != nil {
			return errors.New("a lost session lock token out of place")
		}
		q.sessions.lose(m, lockToken(tok))
	}
	if m.state == stateLocked && m.expiresMs <= e.now {
		// Its expiry already fired; it expires when the lock ends.
		q.expiries.remove(m)
	}
	return nil
}

// checkSessionLocks checks, once a snapshot is read, that every locked
// message of a session belongs to a held session, whose lock ends those
// locked under it when they end: otherwise nothing would ever release it.
func (e *Engine) checkSessionLocks() error {
	for _, ent := range e.sorted {
		x := ent.main.sessions
		if x == nil {
			continue
		}
		var err error
		ent.main.all.ascend(0, func(m *message) bool {
			s := x.owner[m]
			switch {
			case m.state != stateLocked:
			case !s.held():
				err = fmt.Errorf("entity %q, message %d: locked in session %q, which nobody holds", ent.path, m.seq, s.id)
			case m.underSessionLock && m.dueMs != s.lockedUntil:
				err = fmt.Errorf("entity %q, message %d: locked under the lock of session %q until %d, the session until %d", ent.path, m.seq, s.id, m.dueMs, s.lockedUntil)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
