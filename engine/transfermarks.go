package engine

import (
	"sort"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
)

// A target entity keeps one mark per source stream it accepted transfers
// from (see transfer.go): the highest number accepted, which a repeat is
// judged by. A stream is a source partition of one incarnation of its
// entity; once that entity is deleted no new transfer comes from it, and
// the cluster, which knows what is deleted, has the target forget the
// mark (ForgetTransferStreams) once the stream has been quiet long enough
// for a transfer sent before the deletion to have arrived. The marks are
// thus as many as the live source partitions, however many transfers
// went through them and however often sources come and go.

// streamMark is an entity's mark of one source stream.
type streamMark struct {
	number uint64
	// acceptedMs is when number was accepted (0 before version 8).
	acceptedMs int64
}

// raiseMark records that the stream's transfers up to number were
// accepted at now.
func (ent *entity) raiseMark(stream string, number uint64, now int64, version uint32) {
	if ent.transfersIn == nil {
		ent.transfersIn = make(map[string]streamMark)
	}
	m := streamMark{number: number}
	if version >= versionForgetTransferStreams {
		m.acceptedMs = now
	}
	ent.transfersIn[stream] = m
}

func (ent *entity) restoreMark(stream string, m streamMark) {
	if ent.transfersIn == nil {
		ent.transfersIn = make(map[string]streamMark)
	}
	ent.transfersIn[stream] = m
}

// forgetTransferStreams drops the marks named that have not risen for
// the command's unused_for_ms.
func (e *Engine) forgetTransferStreams(now int64, c *enginev1.ForgetTransferStreams) (int32, *Error) {
	ent, err := e.entity(c.GetEntityPath())
	if err != nil {
		return 0, err
	}
	if e.version < versionForgetTransferStreams {
		return 0, nil
	}
	var n int32
	for _, s := range c.GetStreams() {
		if m, ok := ent.transfersIn[s]; ok && now-m.acceptedMs >= c.GetUnusedForMs() {
			delete(ent.transfersIn, s)
			n++
		}
	}
	return n, nil
}

// transferMarks are an entity's marks in stream order, for snapshots.
func (ent *entity) transferMarks() []*enginev1.TransferMark {
	out := make([]*enginev1.TransferMark, 0, len(ent.transfersIn))
	for _, s := range ent.streams() {
		m := ent.transfersIn[s]
		out = append(out, &enginev1.TransferMark{Stream: s, Number: m.number, AcceptedUnixMs: m.acceptedMs})
	}
	return out
}

func (ent *entity) streams() []string {
	out := make([]string, 0, len(ent.transfersIn))
	for s := range ent.transfersIn {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// SourceStreams are the source streams the partition's entities hold a
// mark of, by entity path, each sorted.
func (e *Engine) SourceStreams() map[string][]string {
	out := make(map[string][]string)
	for _, ent := range e.sorted {
		if len(ent.transfersIn) > 0 {
			out[ent.path] = ent.streams()
		}
	}
	return out
}

// TransferMarkCount is how many marks the partition's entities hold.
func (e *Engine) TransferMarkCount() int {
	n := 0
	for _, ent := range e.sorted {
		n += len(ent.transfersIn)
	}
	return n
}
