package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// checkedLog is the metadata group's bbolt log with a checksum in every
// entry: a CRC-32C over the entry (index, term, type, data, extensions),
// put in front of its Extensions when it is stored and checked and taken
// off when it is read. bbolt checksums only its own metadata pages, so
// without this a flipped bit in an entry would be served.
type checkedLog struct{ raft.LogStore }

// checkMagic starts the Extensions of every entry the metadata log
// stores; the checksum follows.
const checkMagic = "rbc1"

var errMetaEntryDamaged = errors.New("entry fails its checksum")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func entryChecksum(l *raft.Log) uint32 {
	var h [17]byte
	binary.LittleEndian.PutUint64(h[:], l.Index)
	binary.LittleEndian.PutUint64(h[8:], l.Term)
	h[16] = byte(l.Type)
	c := crc32.Update(0, castagnoli, h[:])
	c = crc32.Update(c, castagnoli, l.Data)
	return crc32.Update(c, castagnoli, l.Extensions)
}

func sealed(l *raft.Log) *raft.Log {
	c := *l
	ext := make([]byte, 8+len(l.Extensions))
	copy(ext, checkMagic)
	binary.LittleEndian.PutUint32(ext[4:], entryChecksum(l))
	copy(ext[8:], l.Extensions)
	c.Extensions = ext
	return &c
}

func (s checkedLog) StoreLog(l *raft.Log) error { return s.LogStore.StoreLog(sealed(l)) }

func (s checkedLog) StoreLogs(logs []*raft.Log) error {
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		out[i] = sealed(l)
	}
	return s.LogStore.StoreLogs(out)
}

func (s checkedLog) GetLog(index uint64, out *raft.Log) error {
	if err := s.LogStore.GetLog(index, out); err != nil {
		return err
	}
	ext := out.Extensions
	if len(ext) < 8 || string(ext[:4]) != checkMagic {
		return fmt.Errorf("metadata log entry %d: %w (or was written by an earlier raftbus)", index, errMetaEntryDamaged)
	}
	out.Extensions = nil
	if len(ext) > 8 {
		out.Extensions = ext[8:]
	}
	if binary.LittleEndian.Uint32(ext[4:]) != entryChecksum(out) || out.Index != index {
		return fmt.Errorf("metadata log entry %d: %w", index, errMetaEntryDamaged)
	}
	return nil
}

// verify reads every entry, checking it, and every page of bbolt's on
// the way (see readGuarded).
func (s checkedLog) verify() error {
	return readGuarded(s.verifyEntries)
}

func (s checkedLog) verifyEntries() error {
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.LastIndex()
	if err != nil {
		return err
	}
	var l raft.Log
	for i := first; i <= last && last > 0; i++ {
		if err := s.GetLog(i, &l); err != nil {
			return err
		}
	}
	return nil
}

// checkedStable is the metadata group's term and vote store with a
// checksum in every value: a CRC-32C over key and value, after a magic,
// in front of the value. A flipped bit in a stored term could otherwise
// let the node vote twice in one term (3000 single bits flipped in a
// metadata log at random changed its term unnoticed once). Values from
// before the checksums, which carry no magic, are read as they are; a
// uint64 in neither form is damage.
type checkedStable struct{ raft.StableStore }

// stableMagic starts every value the store holds; the checksum follows.
const stableMagic = "rbs1"

var errMetaVoteDamaged = errors.New("term or vote fails its checksum")

func stableChecksum(k, v []byte) uint32 {
	return crc32.Update(crc32.Checksum(k, castagnoli), castagnoli, v)
}

func (s checkedStable) Set(k, v []byte) error {
	sealed := make([]byte, 8+len(v))
	copy(sealed, stableMagic)
	binary.LittleEndian.PutUint32(sealed[4:], stableChecksum(k, v))
	copy(sealed[8:], v)
	return s.StableStore.Set(k, sealed)
}

// Get returns the value of k; a missing one is raft-boltdb's error as it
// is, which raft tells by its text.
func (s checkedStable) Get(k []byte) ([]byte, error) {
	raw, err := s.StableStore.Get(k)
	if err != nil || len(raw) < 8 || string(raw[:4]) != stableMagic {
		return raw, err
	}
	v := raw[8:]
	if binary.LittleEndian.Uint32(raw[4:]) != stableChecksum(k, v) {
		return nil, fmt.Errorf("metadata store %s: %w", k, errMetaVoteDamaged)
	}
	return v, nil
}

func (s checkedStable) SetUint64(k []byte, v uint64) error {
	return s.Set(k, binary.BigEndian.AppendUint64(nil, v))
}

func (s checkedStable) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("metadata store %s: %w (%d bytes)", k, errMetaVoteDamaged, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// failStopStore is the metadata group's bbolt store with the node log's
// rule for a failed write (see openStorage): onFail is told, and the node
// stops saying why, rather than leave hashicorp/raft to step down, retry
// and panic at its next term change with a bare "failed to save current
// term". Reads are bbolt's own.
//
// A write can also fault: when the file system under the store goes away
// (ext4 shut down), bbolt rolls a failed commit back by reading its meta
// page through its memory map, which then faults, and the process would
// die of it with a Go stack instead of the message. Writes run guarded
// (see writeGuarded); a store that faulted may hold its lock for good, so
// it is not closed afterwards (faulted).
type failStopStore struct {
	*raftboltdb.BoltStore
	onFail  func(error)
	faulted *atomic.Bool
}

func newFailStopStore(store *raftboltdb.BoltStore, onFail func(error)) failStopStore {
	return failStopStore{store, onFail, new(atomic.Bool)}
}

func (s failStopStore) write(what string, write func() error) error {
	err := writeGuarded(write, s.faulted)
	if err != nil {
		s.onFail(fmt.Errorf("%s: %w", what, err))
	}
	return err
}

func (s failStopStore) StoreLog(l *raft.Log) error {
	return s.write("store entry", func() error { return s.BoltStore.StoreLog(l) })
}

func (s failStopStore) StoreLogs(logs []*raft.Log) error {
	return s.write("store entries", func() error { return s.BoltStore.StoreLogs(logs) })
}

func (s failStopStore) DeleteRange(min, max uint64) error {
	return s.write("delete entries", func() error { return s.BoltStore.DeleteRange(min, max) })
}

func (s failStopStore) Set(k, v []byte) error {
	return s.write("store "+string(k), func() error { return s.BoltStore.Set(k, v) })
}

func (s failStopStore) SetUint64(k []byte, v uint64) error {
	return s.write("store "+string(k), func() error { return s.BoltStore.SetUint64(k, v) })
}

// writeGuarded runs write, a bbolt write, and turns a fault or a panic in
// it into an error, recording it in faulted: unlike a read, an interrupted
// write transaction may keep the store's lock.
func writeGuarded(write func() error, faulted *atomic.Bool) error {
	err := readGuarded(write)
	if errors.Is(err, errBoltFault) {
		faulted.Store(true)
	}
	return err
}

// errBoltFault is wrapped by the error of a read or write that faulted or
// panicked in bbolt.
var errBoltFault = errors.New("bbolt faulted on its file")

// readGuarded runs read, which reads a bbolt file through its memory map,
// and turns a fault or a panic there into an error. bbolt checks only its
// meta pages: a damaged page elsewhere can send it to an address outside
// the map, which would end the process with a fault, or to a page of the
// wrong type, on which it panics. Its read transactions are rolled back
// by deferred calls, so the store can be closed afterwards.
func readGuarded(read func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errBoltFault, r)
		}
	}()
	return read()
}
