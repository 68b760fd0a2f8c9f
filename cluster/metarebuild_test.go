package cluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// metaStoreAt creates a metadata store in dir with a term, a vote and one
// entry.
func metaStoreAt(t *testing.T, dir string, term uint64, cand string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	s, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, err := range []error{
		s.SetUint64([]byte(keyCurrentTerm), term),
		s.SetUint64([]byte(keyLastVoteTerm), term),
		s.Set([]byte(keyLastVoteCand), []byte(cand)),
		s.StoreLog(&raft.Log{Index: 1, Term: term, Data: []byte("entry")}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A rebuilt metadata store keeps the term and vote of the damaged one and
// nothing else, and the damaged one is kept aside.
func TestARebuiltMetadataStoreKeepsItsTermAndVoteOnly(t *testing.T) {
	data := t.TempDir()
	metaStoreAt(t, filepath.Join(data, metaDirName), 7, "n2")
	votes, err := readVoteState(filepath.Join(data, metaDirName, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := replaceMetaDir(data, votes); err != nil {
		t.Fatal(err)
	}
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(data, metaDirName, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	s := checkedStable{bolt}
	term, _ := s.GetUint64([]byte(keyCurrentTerm))
	voteTerm, _ := s.GetUint64([]byte(keyLastVoteTerm))
	cand, _ := s.Get([]byte(keyLastVoteCand))
	last, _ := bolt.LastIndex()
	if term != 7 || voteTerm != 7 || string(cand) != "n2" || last != 0 {
		t.Fatalf("rebuilt store: term %d, vote in %d for %q, last entry %d; want 7, 7, n2 and none", term, voteTerm, cand, last)
	}
	if _, err := os.Stat(filepath.Join(data, metaDamagedDirName, "raft.db")); err != nil {
		t.Fatalf("the damaged store was not kept: %v", err)
	}
}

// A crash while the rebuilt store replaces the damaged one is finished
// at the next start, whichever rename it fell between.
func TestAnInterruptedMetadataRebuildIsFinished(t *testing.T) {
	entries := func(t *testing.T, dir string) uint64 {
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		last, _ := s.LastIndex()
		return last
	}
	t.Run("before the damaged store moved", func(t *testing.T) {
		data := t.TempDir()
		metaStoreAt(t, filepath.Join(data, metaDirName), 3, "n1")
		metaStoreAt(t, filepath.Join(data, metaRebuildDirName), 3, "n1")
		if err := finishMetaRebuild(data); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(data, metaRebuildDirName)); !os.IsNotExist(err) {
			t.Fatalf("the half-written store is still there: %v", err)
		}
		if entries(t, filepath.Join(data, metaDirName)) != 1 {
			t.Fatal("the store in place (to be found damaged again) was changed")
		}
	})
	t.Run("after it moved", func(t *testing.T) {
		data := t.TempDir()
		metaStoreAt(t, filepath.Join(data, metaDamagedDirName), 3, "n1")
		if err := os.MkdirAll(filepath.Join(data, metaRebuildDirName), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := finishMetaRebuild(data); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(data, metaDirName)); err != nil {
			t.Fatalf("the rebuilt store was not put in place: %v", err)
		}
	})
}

// flipInMetaLog damages every stored copy of text in node i's metadata
// log (the node is stopped).
func flipInMetaLog(t *testing.T, c *testCluster, i int, text string) {
	t.Helper()
	path := filepath.Join(c.dir, c.nodeID(i), metaDirName, "raft.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(b, []byte(text))
	if n == 0 {
		t.Fatalf("%q is nowhere in %s", text, path)
	}
	b = bytes.ReplaceAll(b, []byte(text), []byte(strings.ToUpper(text)))
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// A single-node cluster has no other copy of its metadata: a damaged
// metadata log stops it from starting, saying so.
func TestASingleNodeWithADamagedMetadataLogRefusesToStart(t *testing.T) {
	c := newTestCluster(t, 1)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "marked-queue"})
	addr := c.stop(0)
	flipInMetaLog(t, c, 0, "marked-queue")
	refusesToStart(t, Config{NodeID: c.nodeID(0), ListenAddr: addr, DataDir: filepath.Join(c.dir, c.nodeID(0)), Clock: c.clocks[0]},
		"a damaged metadata log", "metadata log", "is damaged", "no other member of its cluster answered")
}

// refusesToStart starts a node on cfg and checks that it refuses, saying
// every one of want; on is what it must not start on.
func refusesToStart(t *testing.T, cfg Config, on string, want ...string) {
	t.Helper()
	nd, err := Start(cfg)
	if err == nil {
		nd.Close()
		t.Fatalf("the node started on %s", on)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("refused with %q, want it to say %q", err, w)
		}
	}
}

// A member whose metadata log is gone must not form a cluster of its own
// from its peer list (here: itself alone) when no peer answers.
func TestAMemberWithoutItsMetadataLogDoesNotFormAClusterAlone(t *testing.T) {
	c := newTestCluster(t, 1)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders"})
	await.Until(t, 10*time.Second, "the node to record its cluster", func() bool { return c.nodes[0].ident.record().ClusterID != "" })
	addr := c.stop(0)
	if err := os.RemoveAll(filepath.Join(c.dir, c.nodeID(0), metaDirName)); err != nil {
		t.Fatal(err)
	}
	nd, err := Start(Config{NodeID: c.nodeID(0), ListenAddr: addr, DataDir: filepath.Join(c.dir, c.nodeID(0)), Clock: c.clocks[0]})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, qerr := dial(t, addr).admin.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: "orders"})
		nd.Close()
		t.Fatalf("the node formed a cluster of its own without its metadata (queue orders: %v)", qerr)
	}
	if !strings.Contains(err.Error(), "holds no metadata log") {
		t.Fatalf("refused with %q, want it to say it holds no metadata log", err)
	}
}

// The metadata store's term and vote carry a checksum; values written
// before they did are read as they are.
func TestMetadataTermAndVoteCarryAChecksum(t *testing.T) {
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	s := checkedStable{bolt}
	if err := s.SetUint64([]byte(keyCurrentTerm), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte(keyLastVoteCand), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if term, err := s.GetUint64([]byte(keyCurrentTerm)); err != nil || term != 42 {
		t.Fatalf("term %d, %v; want 42", term, err)
	}
	if cand, err := s.Get([]byte(keyLastVoteCand)); err != nil || string(cand) != "n2" {
		t.Fatalf("vote for %q, %v; want n2", cand, err)
	}
	// raft tells a missing key by the text of raft-boltdb's error.
	if _, err := s.GetUint64([]byte(keyLastVoteTerm)); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v, want raft-boltdb's not found", err)
	}

	// Every single bit of the stored values flipped is found out.
	for _, key := range []string{keyCurrentTerm, keyLastVoteCand} {
		raw, err := bolt.Get([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		for bit := range 8 * len(raw) {
			damaged := bytes.Clone(raw)
			damaged[bit/8] ^= 1 << (bit % 8)
			if err := bolt.Set([]byte(key), damaged); err != nil {
				t.Fatal(err)
			}
			var got any
			if key == keyCurrentTerm {
				got, err = s.GetUint64([]byte(key))
			} else {
				got, err = s.Get([]byte(key))
				if bit < 32 && err == nil && !bytes.Equal(got.([]byte), []byte("n2")) {
					// A damaged magic reads as a value of an earlier
					// version: a vote for nobody that exists, which
					// refuses votes rather than grant a second one.
					continue
				}
			}
			if err == nil {
				t.Fatalf("%s with bit %d flipped read as %v", key, bit, got)
			}
		}
		if err := bolt.Set([]byte(key), raw); err != nil {
			t.Fatal(err)
		}
	}

	// Values of earlier versions.
	if err := bolt.SetUint64([]byte(keyLastVoteTerm), 41); err != nil {
		t.Fatal(err)
	}
	if err := bolt.Set([]byte(keyLastVoteCand), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	votes, err := readVotes(s)
	if err != nil || votes.term != 42 || votes.voteTerm != 41 || string(votes.voteCand) != "n3" {
		t.Fatalf("read %+v, %v; want term 42, vote in 41 for n3", votes, err)
	}
}

// A member whose stored term is damaged refuses to start: rebuilding its
// metadata log would need the term and vote it kept.
func TestAMemberWhoseMetadataTermIsDamagedRefusesToStart(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "orders"})
	addr := c.stop(2)
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(c.dataDir(2), metaDirName, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Get([]byte(keyCurrentTerm))
	if err == nil {
		raw[len(raw)-1] ^= 0x04 // the term's lowest byte
		err = bolt.Set([]byte(keyCurrentTerm), raw)
	}
	if cerr := bolt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	refusesToStart(t, Config{NodeID: c.nodeID(2), ListenAddr: addr, DataDir: c.dataDir(2), Join: c.nodes[0].Addr(), Clock: c.clocks[2]},
		"a damaged term", "term or vote fails its checksum", "could vote twice", "raftbus node remove n3")
}
