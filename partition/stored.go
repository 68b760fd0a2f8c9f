package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// ErrDamaged is wrapped by the errors that say a replica's stored state
// cannot be trusted: it must not vote, lead or serve, and is rebuilt from
// its peers.
var ErrDamaged = errors.New("stored state is damaged")

func damaged(name, format string, args ...any) error {
	return fmt.Errorf("partition %s: %w: %s", name, ErrDamaged, fmt.Sprintf(format, args...))
}

// logCacheSize is how many of its latest entries a replica keeps in
// memory for replication and apply to read back.
const logCacheSize = 64

// Snapshots is raft's file snapshot store with two changes: it lists only
// the newest snapshot, so raft never falls back to an older one whose log
// was truncated long ago (it would start from old state without a word),
// and a snapshot that fails its checksum when opened is reported as
// damage. Partitions use it, and so does the metadata group.
type Snapshots struct {
	*raft.FileSnapshotStore
	dir      string
	name     string
	onDamage func(error)
	// expand, when set, rewrites a snapshot opened once raft has started
	// (to be sent, or installed from a peer) so that it holds what it
	// refers to in this replica's log.
	expand  func(r io.Reader, w io.Writer) (int64, error)
	started atomic.Bool
}

// OpenSnapshots opens the snapshot store in dir of the Raft group name;
// onDamage, when set, is told of a snapshot found damaged when read.
func OpenSnapshots(dir, name string, logger *slog.Logger, onDamage func(error)) (*Snapshots, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, RaftLogger(logger, name))
	if err != nil {
		return nil, fmt.Errorf("partition %s: open snapshot store: %w", name, err)
	}
	return &Snapshots{FileSnapshotStore: fs, dir: dir, name: name, onDamage: onDamage}, nil
}

func (s *Snapshots) List() ([]*raft.SnapshotMeta, error) {
	list, err := s.FileSnapshotStore.List()
	if len(list) > 1 {
		list = list[:1]
	}
	return list, err
}

func (s *Snapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.expand != nil && s.started.Load() {
		return s.openExpanded(id)
	}
	return s.open(id)
}

func (s *Snapshots) open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, r, err := s.FileSnapshotStore.Open(id)
	if err != nil && snapshotDamaged(err) {
		err = damaged(s.name, "snapshot %s: %v", id, err)
		if s.onDamage != nil {
			s.onDamage(err)
		}
	}
	return meta, r, err
}

// openExpanded opens snapshot id rewritten by s.expand: once to learn the
// size of the copy (raft sends the size first), then for the copy, made
// as it is read.
func (s *Snapshots) openExpanded(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, r, err := s.open(id)
	if err != nil {
		return nil, nil, err
	}
	size, err := s.expand(r, nil)
	r.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("partition %s: snapshot %s: %w", s.name, id, err)
	}
	meta, r, err = s.open(id)
	if err != nil || size == meta.Size {
		return meta, r, err // nothing to rewrite
	}
	expanded := *meta
	expanded.Size = size
	pr, pw := io.Pipe()
	// The copy ends when it is done or when the reader is closed (the
	// pipe's writes fail).
	go func() {
		_, err := s.expand(r, pw)
		r.Close()
		pw.CloseWithError(err)
	}()
	return &expanded, pr, nil
}

// snapshotDamaged tells a snapshot that fails its checks from one that
// could not be read (a full disk, a missing file).
func snapshotDamaged(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return strings.Contains(err.Error(), "CRC mismatch") || errors.As(err, &syntax) || errors.As(err, &typ) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// CheckStored checks that the stored state of a member of Raft group name
// holds together before raft starts on it: every snapshot's metadata
// reads, the newest snapshot matches its checksum, the log joins the
// snapshot without a gap, and a member with a log or a snapshot has its
// term. raft itself would skip a snapshot it cannot read (falling back to
// an older one) and never looks for a gap. Failures wrap ErrDamaged.
func CheckStored(name string, snaps *Snapshots, logs raft.LogStore, stable raft.StableStore) error {
	dir := filepath.Join(snaps.dir, "snapshots")
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("partition %s: list snapshots: %w", name, err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		var meta raft.SnapshotMeta
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		if err != nil {
			return damaged(name, "snapshot %s: metadata: %v", e.Name(), err)
		}
	}
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("partition %s: list snapshots: %w", name, err)
	}
	var snapIndex uint64
	if len(list) > 0 {
		_, r, err := snaps.FileSnapshotStore.Open(list[0].ID) // reads it all to check the CRC
		if err != nil {
			return damaged(name, "snapshot %s: %v", list[0].ID, err)
		}
		r.Close()
		snapIndex = list[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("partition %s: log: %w", name, err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("partition %s: log: %w", name, err)
	}
	if last > 0 && first > snapIndex+1 {
		if snapIndex == 0 {
			return damaged(name, "the log starts at entry %d and there is no snapshot", first)
		}
		return damaged(name, "the log starts at entry %d, after the snapshot's end at %d", first, snapIndex)
	}
	if last > 0 || snapIndex > 0 {
		if term, err := stable.GetUint64(keyCurrentTerm); err != nil || term == 0 {
			return damaged(name, "the log or snapshot is there but the current term is not")
		}
	}
	return nil
}

// keyCurrentTerm is where raft keeps a replica's current term in its
// stable store.
var keyCurrentTerm = []byte("CurrentTerm")
