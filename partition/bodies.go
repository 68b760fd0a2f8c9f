package partition

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Message bodies stay in the log. The entry that sends a message already
// holds its body, on every replica's disk, so the state machine keeps
// only where the body lies (engine.BodyRef: the entry's index and the
// body's place in its data) and the partition reads it back when a
// receive, a peek or the forwarder hands the message out. The log keeps
// every entry a stored message refers to (pinnedLog), and a snapshot
// sent to a peer, which lacks those entries, carries the bodies
// (expandSnapshot).

// minBodyOnDisk is the smallest body kept in the log rather than in
// memory: a reference takes 16 bytes in any case.
const minBodyOnDisk = 32

// Field numbers of the encodings bodyRefs walks (see command.proto and
// message.proto).
const (
	fieldEntryCommands   = 1
	fieldCommandSend     = 11
	fieldCommandSchedule = 12
	fieldSendMessages    = 2 // Send.messages and Schedule.messages
	fieldMessageBody     = 2
)

// bodyRefs returns, for each command of entry (decoded from data, the
// data of log entry index), where the bodies of the messages it sends lie
// in data, or nil for a command that sends none. A command whose walk
// does not match what decoding found (which no leader of ours writes)
// keeps its bodies in memory.
func bodyRefs(index uint64, data []byte, entry *enginev1.Entry) [][]engine.BodyRef {
	var out [][]engine.BodyRef
	walkFields(data, 0, func(num protowire.Number, off int, cmd []byte) {
		if num != fieldEntryCommands {
			return
		}
		var refs []engine.BodyRef
		walkFields(cmd, off, func(num protowire.Number, off int, send []byte) {
			if num != fieldCommandSend && num != fieldCommandSchedule {
				return
			}
			walkFields(send, off, func(num protowire.Number, off int, msg []byte) {
				if num != fieldSendMessages {
					return
				}
				var ref engine.BodyRef
				walkFields(msg, off, func(num protowire.Number, off int, body []byte) {
					if num == fieldMessageBody {
						ref = engine.BodyRef{Index: index, Offset: uint32(off), Length: uint32(len(body))}
					}
				})
				refs = append(refs, ref)
			})
		})
		out = append(out, refs)
	})
	if len(out) != len(entry.GetCommands()) {
		return nil
	}
	for i, cmd := range entry.GetCommands() {
		msgs := cmd.GetSend().GetMessages()
		if s := cmd.GetSchedule(); s != nil {
			msgs = s.GetMessages()
		}
		if len(msgs) != len(out[i]) {
			out[i] = nil
			continue
		}
		for j, m := range msgs {
			ref := &out[i][j]
			if len(m.GetBody()) < minBodyOnDisk || int(ref.Length) != len(m.GetBody()) ||
				!bytes.Equal(data[ref.Offset:ref.Offset+ref.Length], m.GetBody()) {
				*ref = engine.BodyRef{}
			}
		}
	}
	return out
}

// walkFields calls fn with each length-delimited field of the encoded
// message b (at offset base of the entry's data) and the offset of its
// value; it stops at the first field it cannot parse.
func walkFields(b []byte, base int, fn func(num protowire.Number, off int, value []byte)) {
	pos := 0
	for pos < len(b) {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return
		}
		pos += n
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b[pos:])
			if m < 0 {
				return
			}
			pos += m
			continue
		}
		v, m := protowire.ConsumeBytes(b[pos:])
		if m < 0 {
			return
		}
		fn(num, base+pos+m-len(v), v)
		pos += m
	}
}

// bodyReader reads message bodies back from a replica's log, keeping the
// data of the entries it read last: a drain in order reads each entry
// once for all the messages it sent.
type bodyReader struct {
	name string
	log  raft.LogStore

	mu     sync.Mutex
	cache  map[uint64][]byte
	order  []uint64 // cached indexes, oldest first
	cached int
}

// bodyCacheBytes bounds the entry data a partition keeps for reads.
const bodyCacheBytes = 4 << 20

func newBodyReader(name string, log raft.LogStore) *bodyReader {
	return &bodyReader{name: name, log: log, cache: make(map[uint64][]byte)}
}

// read returns the body ref points to. The bytes are shared: they must
// not be changed.
func (b *bodyReader) read(ref engine.BodyRef) ([]byte, error) {
	data, err := b.entry(ref.Index)
	if err != nil {
		return nil, err
	}
	end := uint64(ref.Offset) + uint64(ref.Length)
	if end > uint64(len(data)) {
		return nil, fmt.Errorf("partition %s: entry %d holds %d bytes, not the body at %d..%d", b.name, ref.Index, len(data), ref.Offset, end)
	}
	return data[ref.Offset:end:end], nil
}

func (b *bodyReader) entry(index uint64) ([]byte, error) {
	b.mu.Lock()
	data, ok := b.cache[index]
	b.mu.Unlock()
	if ok {
		return data, nil
	}
	var l raft.Log
	if err := b.log.GetLog(index, &l); err != nil {
		return nil, fmt.Errorf("partition %s: read the bodies of entry %d: %w", b.name, index, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.cache[index]; !ok && len(l.Data) <= bodyCacheBytes {
		b.cache[index] = l.Data
		b.order = append(b.order, index)
		b.cached += len(l.Data)
		for b.cached > bodyCacheBytes {
			old := b.order[0]
			b.order = slices.Delete(b.order, 0, 1)
			b.cached -= len(b.cache[old])
			delete(b.cache, old)
		}
	}
	return l.Data, nil
}

// fill sets the bodies of the messages handed out.
func (b *bodyReader) fill(pending []engine.PendingBody) error {
	for _, p := range pending {
		body, err := b.read(p.Ref)
		if err != nil {
			return newError(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
				"%v; the messages were handed out without being delivered: those locked come back once their locks expire", err)
		}
		p.Message.Body = body
	}
	return nil
}

// pinnedLog keeps, when raft compacts its log after a snapshot, every
// entry that holds the body of a message still stored (from oldest on);
// raft sees those entries as log it has not compacted yet.
type pinnedLog struct {
	raft.LogStore
	oldest func() uint64
}

func (l pinnedLog) DeleteRange(min, max uint64) error {
	// A prefix, after a snapshot. A suffix (a conflict with the leader)
	// and the whole log (a snapshot installed) go as asked.
	if last, err := l.LastIndex(); err == nil && max < last {
		if pin := l.oldest(); pin > 0 && max >= pin {
			max = pin - 1
		}
		if max < min {
			return nil
		}
	}
	return l.LogStore.DeleteRange(min, max)
}

func (l pinnedLog) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// expandSnapshot copies the partition snapshot r holds to w with the
// bodies it refers to written into it, as engine.ExpandBodies does; with
// a nil w it returns the size of the copy.
func expandSnapshot(r io.Reader, w io.Writer, read func(engine.BodyRef) ([]byte, error)) (int64, error) {
	prefix := make([]byte, len(snapshotMagic)+8)
	n, err := io.ReadFull(r, prefix)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, fmt.Errorf("read snapshot: %w", err)
	}
	prefix = prefix[:n]
	rest := io.MultiReader(bytes.NewReader(prefix), r)
	var head int64
	if bytes.HasPrefix(prefix, snapshotMagic) && n == len(prefix) {
		rest, head = r, int64(n)
		if w != nil {
			if _, err := w.Write(prefix); err != nil {
				return 0, err
			}
		}
	}
	size, err := engine.ExpandBodies(rest, w, read)
	return head + size, err
}
