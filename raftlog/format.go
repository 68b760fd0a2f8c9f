package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// The on-disk format. All integers are little endian; every checksum is
// CRC-32C (Castagnoli, hardware-accelerated on amd64 and arm64).
//
// A segment file starts with a 64-byte header:
//
//	magic "RBLOGSEG" | version u32 | 0 u32 | seq u64 | size u64 | firstBatch u64 | 0... | crc u32 (at 60, over bytes 0-59)
//
// and holds batches back to back. A batch is what one write and one sync
// put on disk:
//
//	magic "RBLOGBAT" | crc u32 | hlen u32 | header (hlen bytes) | records...
//
// where the header is total u32 (the batch's length, this frame included)
// | seq u64 | records u32 | groups u16 | the names of the groups with a
// record in the batch (u16 length + bytes each), and crc covers hlen and
// the header. Batch sequence numbers rise by one across the whole log.
//
// A record is
//
//	hlen u32 | blen u32 | bcrc u32 | hcrc u32 | header (hlen bytes) | body (blen bytes)
//
// with hcrc over the first twelve bytes and the header, bcrc over the
// body. Keeping the two apart tells a damaged body (the record's group is
// known: only that group is damaged) from a damaged header (the record's
// extent is unknown: the rest of the batch is lost, and with it every group
// the batch header names). The header is type u8 | created u64 | group
// (u16 length + bytes) and then by type:
//
//	entry, carried entry: index u64 | term u64 | log type u8 | appended at (unix ns) i64; body: ext length u32 | extensions | data
//	state:                key (u16 length + bytes); body: value
//	truncate prefix:      index u64 (entries below it are gone)
//	truncate suffix:      index u64 (entries from it on are gone)
//	carry begin:          first u64 | last u64 (the entries the carry holds; 0, 0 for none)
//	drop, seal, carry end: nothing
//
// A carry is a group's live records rewritten at the head of the log by
// the collector: carry begin, the entries as carried entries, the stable
// values as state records, carry end, in batches of their own. Once its
// end is read, it replaces the group's entries.
//
// created is the batch sequence number current when the group's
// incarnation began: a loss in batches up to s can only have hurt groups
// created at or before s.
//
// A log closed cleanly leaves a file CLOSED beside its segments:
//
//	magic "RBLOGCLS" | segment u32 | end u64 | next batch u64 | crc u32 (over the rest)
//
// saying where the data ends. Opening the log removes it before anything
// is written, so while it exists nothing follows the end it names, and
// damage at the end of the last segment cannot pass for a torn write.

const (
	segmentMagic      = "RBLOGSEG"
	batchMagic        = "RBLOGBAT"
	formatVersion     = 1
	segmentHeaderSize = 64
	batchFrameSize    = 16 // magic, crc, hlen
	recordFrameSize   = 16 // hlen, blen, bcrc, hcrc

	maxRecordHeader = 1 << 16
	maxBatchHeader  = 1 << 24
	// maxRecordBody bounds one entry: far above the largest message an
	// entity accepts, far below what would overflow an offset.
	maxRecordBody = 1 << 30
)

type recordType uint8

const (
	recEntry recordType = iota + 1
	recCarried
	recCarryBegin
	recCarryEnd
	recState
	recTruncPrefix
	recTruncSuffix
	recDrop
	recSeal
)

const (
	closedName  = "CLOSED"
	closedMagic = "RBLOGCLS"
	closedSize  = 8 + 4 + 8 + 8 + 4
)

// closedMark is the content of CLOSED.
type closedMark struct {
	seg       uint32
	end       int64
	nextBatch uint64
}

func (c closedMark) encode() []byte {
	b := make([]byte, closedSize)
	copy(b, closedMagic)
	le.PutUint32(b[8:], c.seg)
	le.PutUint64(b[12:], uint64(c.end))
	le.PutUint64(b[20:], c.nextBatch)
	le.PutUint32(b[28:], checksum(b[:28]))
	return b
}

func parseClosedMark(b []byte) (closedMark, bool) {
	if len(b) != closedSize || string(b[:8]) != closedMagic || le.Uint32(b[28:]) != checksum(b[:28]) {
		return closedMark{}, false
	}
	return closedMark{seg: le.Uint32(b[8:]), end: int64(le.Uint64(b[12:])), nextBatch: le.Uint64(b[20:])}, true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(parts ...[]byte) uint32 {
	var c uint32
	for _, p := range parts {
		c = crc32.Update(c, castagnoli, p)
	}
	return c
}

var le = binary.LittleEndian

// segmentHeader is the first 64 bytes of a segment file.
type segmentHeader struct {
	seq        uint64
	size       int64
	firstBatch uint64
}

func (h segmentHeader) encode() []byte {
	b := make([]byte, segmentHeaderSize)
	copy(b, segmentMagic)
	le.PutUint32(b[8:], formatVersion)
	le.PutUint64(b[16:], h.seq)
	le.PutUint64(b[24:], uint64(h.size))
	le.PutUint64(b[32:], h.firstBatch)
	le.PutUint32(b[60:], checksum(b[:60]))
	return b
}

var errBadSegmentHeader = errors.New("segment header is damaged")

func parseSegmentHeader(b []byte) (segmentHeader, error) {
	if len(b) < segmentHeaderSize || string(b[:8]) != segmentMagic || le.Uint32(b[60:]) != checksum(b[:60]) {
		return segmentHeader{}, errBadSegmentHeader
	}
	if v := le.Uint32(b[8:]); v != formatVersion {
		return segmentHeader{}, errors.New("segment format version is not 1")
	}
	return segmentHeader{seq: le.Uint64(b[16:]), size: int64(le.Uint64(b[24:])), firstBatch: le.Uint64(b[32:])}, nil
}

// batchHeader describes one batch.
type batchHeader struct {
	total   int // bytes of the batch, frame included
	seq     uint64
	records int
	groups  []string
	size    int // bytes of the frame and header
}

// encodeBatchHeader returns the frame and header of a batch whose records
// take recordBytes.
func encodeBatchHeader(seq uint64, records int, groups []string, recordBytes int) []byte {
	hlen := 4 + 8 + 4 + 2
	for _, g := range groups {
		hlen += 2 + len(g)
	}
	b := make([]byte, batchFrameSize+hlen)
	copy(b, batchMagic)
	le.PutUint32(b[12:], uint32(hlen))
	h := b[batchFrameSize:]
	le.PutUint32(h, uint32(batchFrameSize+hlen+recordBytes))
	le.PutUint64(h[4:], seq)
	le.PutUint32(h[12:], uint32(records))
	le.PutUint16(h[16:], uint16(len(groups)))
	p := h[18:]
	for _, g := range groups {
		le.PutUint16(p, uint16(len(g)))
		copy(p[2:], g)
		p = p[2+len(g):]
	}
	le.PutUint32(b[8:], checksum(b[12:]))
	return b
}

// parseBatchHeader reads the batch header at the start of b; ok is false
// when there is none (damaged, torn or never written).
func parseBatchHeader(b []byte) (h batchHeader, ok bool) {
	if len(b) < batchFrameSize || string(b[:8]) != batchMagic {
		return h, false
	}
	hlen := int(le.Uint32(b[12:]))
	if hlen < 18 || hlen > maxBatchHeader || len(b) < batchFrameSize+hlen {
		return h, false
	}
	if le.Uint32(b[8:]) != checksum(b[12:batchFrameSize+hlen]) {
		return h, false
	}
	p := b[batchFrameSize : batchFrameSize+hlen]
	h.total = int(le.Uint32(p))
	h.seq = le.Uint64(p[4:])
	h.records = int(le.Uint32(p[12:]))
	n := int(le.Uint16(p[16:]))
	p = p[18:]
	for range n {
		if len(p) < 2 || len(p) < 2+int(le.Uint16(p)) {
			return h, false
		}
		l := int(le.Uint16(p))
		h.groups = append(h.groups, string(p[2:2+l]))
		p = p[2+l:]
	}
	h.size = batchFrameSize + hlen
	if h.total < h.size {
		return h, false
	}
	return h, true
}

// findBatch returns the offset in b of the first batch header after from
// whose sequence number is at least minSeq, or -1.
func findBatch(b []byte, from int, minSeq uint64) (int, batchHeader) {
	for from < len(b) {
		i := bytes.Index(b[from:], []byte(batchMagic))
		if i < 0 {
			return -1, batchHeader{}
		}
		at := from + i
		if h, ok := parseBatchHeader(b[at:]); ok && h.seq >= minSeq {
			return at, h
		}
		from = at + 1
	}
	return -1, batchHeader{}
}

// record is one decoded record. body aliases the buffer it was read from.
type record struct {
	typ     recordType
	created uint64
	group   string

	// entries; carry begin holds the first and last entry it carries in
	// index and term
	index      uint64
	term       uint64
	logType    raft.LogType
	appendedAt int64
	// state
	key string

	body []byte
	size int // encoded length
}

// recordHeader encodes a record's frame and header; the body follows.
func recordHeader(r *record, blen int, bcrc uint32) []byte {
	hlen := 1 + 8 + 2 + len(r.group)
	switch r.typ {
	case recEntry, recCarried:
		hlen += 8 + 8 + 1 + 8
	case recState:
		hlen += 2 + len(r.key)
	case recTruncPrefix, recTruncSuffix:
		hlen += 8
	case recCarryBegin:
		hlen += 16
	}
	b := make([]byte, recordFrameSize+hlen)
	le.PutUint32(b, uint32(hlen))
	le.PutUint32(b[4:], uint32(blen))
	le.PutUint32(b[8:], bcrc)
	h := b[recordFrameSize:]
	h[0] = byte(r.typ)
	le.PutUint64(h[1:], r.created)
	le.PutUint16(h[9:], uint16(len(r.group)))
	p := h[11+copy(h[11:], r.group):]
	switch r.typ {
	case recEntry, recCarried:
		le.PutUint64(p, r.index)
		le.PutUint64(p[8:], r.term)
		p[16] = byte(r.logType)
		le.PutUint64(p[17:], uint64(r.appendedAt))
	case recState:
		le.PutUint16(p, uint16(len(r.key)))
		copy(p[2:], r.key)
	case recTruncPrefix, recTruncSuffix:
		le.PutUint64(p, r.index)
	case recCarryBegin:
		le.PutUint64(p, r.index)
		le.PutUint64(p[8:], r.term)
	}
	le.PutUint32(b[12:], checksum(b[:12], h))
	return b
}

// encoded is a record ready to write: its frame and header, and its body
// as the pieces it was given, not copied: the writer copies them once,
// into the batch it writes. Pieces must not change until written.
type encoded struct {
	head []byte
	body [][]byte
	n    int // bytes in all
}

// appendTo appends the record's bytes to b.
func (e encoded) appendTo(b []byte) []byte {
	b = append(b, e.head...)
	for _, p := range e.body {
		b = append(b, p...)
	}
	return b
}

// encodeRecord returns r encoded with body as its body.
func encodeRecord(r *record, body ...[]byte) encoded {
	blen := 0
	for _, p := range body {
		blen += len(p)
	}
	head := recordHeader(r, blen, checksum(body...))
	return encoded{head: head, body: body, n: len(head) + blen}
}

// encodeEntry encodes one Raft log entry of a group.
func encodeEntry(group string, created uint64, l *raft.Log, typ recordType) encoded {
	var ext [4]byte
	le.PutUint32(ext[:], uint32(len(l.Extensions)))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	r := &record{typ: typ, created: created, group: group, index: l.Index, term: l.Term, logType: l.Type, appendedAt: at}
	return encodeRecord(r, ext[:], l.Extensions, l.Data)
}

var (
	// errRecordHeader: the record's header is damaged, so is its extent.
	errRecordHeader = errors.New("record header is damaged")
	// errRecordBody: the header is sound (group and extent known) but the
	// body does not match its checksum.
	errRecordBody = errors.New("record body does not match its checksum")
)

// parseRecord decodes the record at the start of b, which must hold the
// whole record. On errRecordBody r and its size are valid, its body not.
func parseRecord(b []byte) (r record, err error) {
	if len(b) < recordFrameSize {
		return r, errRecordHeader
	}
	hlen, blen := int(le.Uint32(b)), int(le.Uint32(b[4:]))
	if hlen < 11 || hlen > maxRecordHeader || blen > maxRecordBody || len(b) < recordFrameSize+hlen {
		return r, errRecordHeader
	}
	h := b[recordFrameSize : recordFrameSize+hlen]
	if le.Uint32(b[12:]) != checksum(b[:12], h) || len(b)-recordFrameSize-hlen < blen {
		return r, errRecordHeader
	}
	r.typ = recordType(h[0])
	r.created = le.Uint64(h[1:])
	gl := int(le.Uint16(h[9:]))
	if 11+gl > len(h) {
		return r, errRecordHeader
	}
	r.group = string(h[11 : 11+gl])
	p := h[11+gl:]
	switch r.typ {
	case recEntry, recCarried:
		if len(p) < 25 {
			return r, errRecordHeader
		}
		r.index, r.term = le.Uint64(p), le.Uint64(p[8:])
		r.logType = raft.LogType(p[16])
		r.appendedAt = int64(le.Uint64(p[17:]))
	case recState:
		if len(p) < 2 || len(p) < 2+int(le.Uint16(p)) {
			return r, errRecordHeader
		}
		r.key = string(p[2 : 2+int(le.Uint16(p))])
	case recTruncPrefix, recTruncSuffix:
		if len(p) < 8 {
			return r, errRecordHeader
		}
		r.index = le.Uint64(p)
	case recCarryBegin:
		if len(p) < 16 {
			return r, errRecordHeader
		}
		r.index, r.term = le.Uint64(p), le.Uint64(p[8:])
	case recDrop, recSeal, recCarryEnd:
	default:
		return r, errRecordHeader
	}
	r.size = recordFrameSize + hlen + blen
	body := b[recordFrameSize+hlen : r.size]
	if le.Uint32(b[8:]) != checksum(body) {
		return r, errRecordBody
	}
	r.body = body
	return r, nil
}

// toLog fills out from an entry record.
func (r *record) toLog(out *raft.Log) error {
	if len(r.body) < 4 || len(r.body)-4 < int(le.Uint32(r.body)) {
		return errRecordBody
	}
	el := int(le.Uint32(r.body))
	out.Index, out.Term, out.Type = r.index, r.term, r.logType
	out.Extensions, out.Data = nil, nil
	if el > 0 {
		out.Extensions = r.body[4 : 4+el]
	}
	if len(r.body) > 4+el {
		out.Data = r.body[4+el:]
	}
	out.AppendedAt = time.Time{}
	if r.appendedAt != 0 {
		out.AppendedAt = time.Unix(0, r.appendedAt)
	}
	return nil
}
