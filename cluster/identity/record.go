package identity

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/raftbus/raftbus/internal/atomicfile"
)

// recordFile is the name of a data dir's record.
const recordFile = "node.json"

// Record is what a data dir records about the node that owns it.
type Record struct {
	NodeID string `json:"node_id"`
	// ClusterID is the cluster the data dir belongs to, once known: a new
	// data dir learns it when its node forms or joins a cluster.
	ClusterID string `json:"cluster_id,omitempty"`
	// Incarnation is drawn when the data dir is created.
	Incarnation string `json:"incarnation,omitempty"`
}

// Claim binds dir to nodeID: it creates dir and its record with a new
// incarnation, or reads the record there and checks that it is nodeID's.
// A record written before incarnations existed gets one now (created
// reports neither case); the cluster adopts it the first time the node
// presents it.
func Claim(dir, nodeID string) (rec Record, created bool, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Record{}, false, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, recordFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		rec = Record{NodeID: nodeID, Incarnation: NewUUID()}
		return rec, true, Save(dir, rec)
	case err != nil:
		return Record{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, false, fmt.Errorf("%s is not a raftbus node identity: %w", path, err)
	}
	if rec.NodeID != nodeID {
		return Record{}, false, fmt.Errorf("data dir %s belongs to node %q, not %q: use that node id or another data dir", dir, rec.NodeID, nodeID)
	}
	if rec.Incarnation == "" {
		rec.Incarnation = NewUUID()
		if err := Save(dir, rec); err != nil {
			return Record{}, false, err
		}
	}
	return rec, false, nil
}

// Save replaces dir's record with rec, atomically: a crash leaves the old
// record or the new one.
func Save(dir string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode node identity: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, recordFile), b, 0o640); err != nil {
		return fmt.Errorf("save node identity: %w", err)
	}
	return nil
}

// NewUUID draws a random (version 4) UUID.
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
