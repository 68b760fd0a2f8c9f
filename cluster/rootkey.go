package cluster

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/internal/atomicfile"
	"github.com/raftbus/raftbus/internal/sas"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// RootKeyFile is the file in a node's data dir holding the connection
// string of the cluster's root policy (RootManageSharedAccessKey):
// readable by the node's user only. It is rewritten when the policy's
// primary key is regenerated.
const RootKeyFile = "root-access-key"

// runRootKeyFile keeps RootKeyFile in step with the root policy, so that
// an operator of a cluster started with --auth finds a way in on any
// node's machine.
func (n *Node) runRootKeyFile() {
	defer n.wg.Done()
	for {
		changed := n.meta.fsm.Changes()
		if err := n.writeRootKey(); err != nil {
			n.log.Error("write the root access key", "err", err)
		}
		select {
		case <-n.stop:
			return
		case <-changed:
		}
	}
}

func (n *Node) writeRootKey() error {
	var key string
	n.meta.fsm.View(func(s *clusterv1.MetaSnapshot) {
		if p := meta.FindPolicy(s, "", meta.RootPolicyName); p != nil {
			key = p.GetPrimaryKey()
		}
	})
	if key == "" {
		return nil
	}
	text := []byte(sas.String("sb://"+n.addr+"/", meta.RootPolicyName, key) + "\n")
	path := filepath.Join(n.cfg.DataDir, RootKeyFile)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, text) {
		return nil
	}
	// Durably: a node whose disk failed came back with the file there and
	// empty (written, renamed, never synced).
	if err := atomicfile.Write(path, text, 0o600); err != nil {
		return err
	}
	if n.cfg.Auth {
		n.log.Info("the root access policy's connection string is in "+path+" (readable by this user only)", "policy", meta.RootPolicyName)
	}
	return nil
}
