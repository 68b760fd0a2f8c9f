package engine

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
)

// ExpandBodies copies the snapshot r holds to w with every body it refers
// to written into it, read with read: the snapshot a replica sends a peer
// that does not hold the log the references point into. It returns the
// bytes written. With a nil w it writes nothing and reads no body, and
// returns the size the copy would have (raft needs the size of a
// snapshot before it sends it).
func ExpandBodies(r io.Reader, w io.Writer, read func(BodyRef) ([]byte, error)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var bw *bufio.Writer
	if w != nil {
		bw = bufio.NewWriterSize(w, 64<<10)
	}
	in := protodelim.UnmarshalOptions{MaxSize: maxRecordSize}
	// placeholder stands for a body when only the size is wanted: the
	// encoding's size does not depend on the bytes.
	var placeholder []byte
	body := func(ref BodyRef) ([]byte, error) {
		if w != nil {
			b, err := read(ref)
			if err == nil && len(b) != int(ref.Length) {
				err = fmt.Errorf("read %d bytes for a body of %d", len(b), ref.Length)
			}
			if err != nil {
				return nil, fmt.Errorf("body at entry %d: %w", ref.Index, err)
			}
			return b, nil
		}
		if len(placeholder) < int(ref.Length) {
			placeholder = make([]byte, ref.Length)
		}
		return placeholder[:ref.Length], nil
	}
	var written int64
	for {
		rec := &enginev1.SnapshotRecord{}
		if err := in.UnmarshalFrom(br, rec); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, fmt.Errorf("engine snapshot: %w", err)
		}
		switch x := rec.GetRecord().(type) {
		case *enginev1.SnapshotRecord_Message:
			if ref := bodyRefOf(x.Message.GetBodyRef()); ref.onDisk() {
				b, err := body(ref)
				if err != nil {
					return 0, fmt.Errorf("engine snapshot: message %d: %w", x.Message.GetSequenceNumber(), err)
				}
				x.Message.Body, x.Message.BodyRef = b, nil
			}
		case *enginev1.SnapshotRecord_Receipt:
			refs := x.Receipt.GetRemovedBodyRefs()
			for i, m := range x.Receipt.GetRemoved() {
				if i >= len(refs) || m.GetMessage() == nil || !bodyRefOf(refs[i]).onDisk() {
					continue
				}
				b, err := body(bodyRefOf(refs[i]))
				if err != nil {
					return 0, fmt.Errorf("engine snapshot: receipt: %w", err)
				}
				m.Message.Body = b
			}
			x.Receipt.RemovedBodyRefs = nil
		}
		if bw == nil {
			n := recordWriter.Size(rec)
			written += int64(protowire.SizeVarint(uint64(n)) + n)
			continue
		}
		n, err := recordWriter.MarshalTo(bw, rec)
		if err != nil {
			return 0, fmt.Errorf("engine snapshot: %w", err)
		}
		written += int64(n)
	}
	if bw != nil {
		if err := bw.Flush(); err != nil {
			return 0, fmt.Errorf("engine snapshot: %w", err)
		}
	}
	return written, nil
}
