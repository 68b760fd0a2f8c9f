package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/raftbus/raftbus/internal/atomicfile"
)

// A member whose metadata log or snapshot fails its checks at start
// rebuilds it from the other nodes rather than refuse to start:
//
//  1. it reads its term and vote from the damaged store (a store whose
//     pages bbolt cannot read to find them cannot be rebuilt: the node
//     refuses to start);
//  2. it asks the metadata leader to make it a non-voter (Join with
//     rebuild_metadata), and waits until that change has committed, so
//     that the other voters hold every entry it ever acknowledged;
//  3. it writes a new store holding only that term and vote (a vote it
//     forgot could be given twice in one term) into meta.rebuild, moves the
//     damaged directory to meta.damaged and meta.rebuild into its place;
//  4. it starts its metadata group on it: the leader sends it a snapshot
//     and the log, and makes it a voter again (reconcileVoters).
//
// A crash between the two renames of step 3 is finished at the next start
// (finishMetaRebuild). A node no other member answers cannot rebuild, and
// refuses to start as before.

// Key names hashicorp/raft keeps its term and vote under in its stable
// store.
const (
	keyCurrentTerm  = "CurrentTerm"
	keyLastVoteTerm = "LastVoteTerm"
	keyLastVoteCand = "LastVoteCand"
)

// Where a data dir keeps the metadata log, the one being written to
// replace it, and the last one found damaged.
const (
	metaDirName        = "meta"
	metaRebuildDirName = "meta.rebuild"
	metaDamagedDirName = "meta.damaged"
)

// voteState is what a Raft member must not forget: its term and vote.
type voteState struct {
	term, voteTerm uint64
	voteCand       []byte
}

// rebuildMeta rebuilds the damaged metadata log of this member (damage is
// openMetaGroup's error) from the other nodes, through formed, a peer
// that answered as a member of the cluster, and opens the group on it.
func (n *Node) rebuildMeta(formed string, damage *metaDamagedError) (*metaGroup, error) {
	refuse := func(why string, args ...any) error {
		return fmt.Errorf("%w; this node cannot start on it, and %s", damage, fmt.Sprintf(why, args...))
	}
	if formed == "" || n.ident.record().ClusterID == "" {
		return nil, refuse("no other member of its cluster answered to rebuild it from: start it again once they run " +
			"(a single-node cluster has nothing to rebuild from: restore the data dir from a backup)")
	}
	n.log.Error("the metadata log is damaged: this node rebuilds it from the other nodes", "dir", damage.Dir, "err", damage.Err)
	votes, err := readVoteState(filepath.Join(damage.Dir, "raft.db"))
	if err != nil {
		return nil, refuse("its term and vote cannot be read (%v), and without them it could vote twice in one term: "+
			"replace it (raftbus node remove %s, then a node under a new id on an empty data dir), or restore the data dir from a backup", err, n.cfg.NodeID)
	}
	if err := n.join(formed, true); err != nil {
		return nil, refuse("the metadata leader did not make it a non-voter to rebuild it (%v): start it again once the cluster has a metadata leader", err)
	}
	if err := replaceMetaDir(n.cfg.DataDir, votes); err != nil {
		return nil, fmt.Errorf("cluster: rebuild the metadata log: %w", err)
	}
	g, err := openMetaGroup(n)
	if err != nil {
		return nil, fmt.Errorf("cluster: open the rebuilt metadata log: %w", err)
	}
	n.log.Info("metadata log replaced; it catches up from the metadata leader",
		"damaged_copy", filepath.Join(n.cfg.DataDir, metaDamagedDirName))
	return g, nil
}

// readVoteState reads the term and vote of a raft-boltdb store.
func readVoteState(path string) (voteState, error) {
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: time.Second, ReadOnly: true}})
	if err != nil {
		return voteState{}, err
	}
	defer store.Close()
	var v voteState
	err = readGuarded(func() (err error) {
		v, err = readVotes(checkedStable{store})
		return err
	})
	return v, err
}

// readVotes reads the term and vote of the metadata store s.
func readVotes(s checkedStable) (v voteState, err error) {
	if v.term, err = optional(s.GetUint64([]byte(keyCurrentTerm))); err != nil {
		return v, err
	}
	if v.voteTerm, err = optional(s.GetUint64([]byte(keyLastVoteTerm))); err != nil {
		return v, err
	}
	v.voteCand, err = optional(s.Get([]byte(keyLastVoteCand)))
	return v, err
}

// optional turns raft-boltdb's "not found" into the zero value.
func optional[T any](v T, err error) (T, error) {
	if err != nil && errors.Is(err, raftboltdb.ErrKeyNotFound) {
		var zero T
		return zero, nil
	}
	return v, err
}

// replaceMetaDir writes a metadata store holding only votes, and puts it
// in place of the damaged one, which is kept as meta.damaged (replacing
// an older one).
func replaceMetaDir(dataDir string, votes voteState) error {
	fresh := filepath.Join(dataDir, metaRebuildDirName)
	if err := os.RemoveAll(fresh); err != nil {
		return err
	}
	if err := os.MkdirAll(fresh, 0o750); err != nil {
		return err
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(fresh, "raft.db")})
	if err != nil {
		return err
	}
	stable := checkedStable{store}
	if votes.term > 0 {
		err = stable.SetUint64([]byte(keyCurrentTerm), votes.term)
	}
	if err == nil && votes.voteTerm > 0 {
		err = stable.SetUint64([]byte(keyLastVoteTerm), votes.voteTerm)
	}
	if err == nil && votes.voteCand != nil {
		err = stable.Set([]byte(keyLastVoteCand), votes.voteCand)
	}
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = atomicfile.SyncDir(fresh)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", fresh, err)
	}
	damaged := filepath.Join(dataDir, metaDamagedDirName)
	if err := os.RemoveAll(damaged); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dataDir, metaDirName), damaged); err != nil {
		return err
	}
	return finishMetaRebuild(dataDir)
}

// finishMetaRebuild completes a replacement of the metadata log that a
// crash interrupted: a new store with the damaged one moved aside is put
// in place; a new store with the damaged one still in place is dropped
// (the next rebuild writes it again).
func finishMetaRebuild(dataDir string) error {
	fresh := filepath.Join(dataDir, metaRebuildDirName)
	if _, err := os.Stat(fresh); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	current := filepath.Join(dataDir, metaDirName)
	_, err := os.Stat(current)
	switch {
	case err == nil:
		err = os.RemoveAll(fresh)
	case errors.Is(err, os.ErrNotExist):
		err = os.Rename(fresh, current)
	}
	if err == nil {
		err = atomicfile.SyncDir(dataDir)
	}
	if err != nil {
		return fmt.Errorf("finish replacing the metadata log in %s: %w", dataDir, err)
	}
	return nil
}
