package partition

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/hashicorp/raft"
)

// Group is what starting a Raft group takes, for every group of a node:
// partitions and the metadata group alike. StartGroup checks what is
// stored before Raft sees it, and StopGroup bounds the shutdown, so that
// both kinds of group start and stop the same way.
type Group struct {
	// Name identifies the group in logs and errors.
	Name   string
	NodeID string
	// Dir holds the group's snapshots. Created if missing.
	Dir string
	// Log and Stable are the group's Raft log and stable store; Log may be
	// a wrapper of the store Stable is part of.
	Log       raft.LogStore
	Stable    raft.StableStore
	Transport raft.Transport
	FSM       raft.FSM
	// Logger receives Raft's logs; OnDamage is told of a snapshot found
	// damaged when read to be sent.
	Logger   *slog.Logger
	OnDamage func(err error)
	// Followers, when set, is filled with the followers' answers to
	// AppendEntries (see HandOver).
	Followers *Followers
	// Config is the group's Raft configuration except for LocalID and
	// Logger, which StartGroup sets.
	Config *raft.Config
	// ExpandSnapshot, when set, rewrites a snapshot for a peer (see
	// Snapshots.Open): the group's snapshots refer to what its log holds.
	ExpandSnapshot func(r io.Reader, w io.Writer) (int64, error)
}

// StartGroup opens g's snapshots, checks that its stored state holds
// together (CheckStored: a failure wraps ErrDamaged, and the group must
// not start on it) and starts Raft.
func StartGroup(g Group) (*raft.Raft, *Snapshots, error) {
	if err := os.MkdirAll(g.Dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("group %s: create data dir: %w", g.Name, err)
	}
	snaps, err := OpenSnapshots(g.Dir, g.Name, g.Logger, g.OnDamage)
	if err != nil {
		return nil, nil, err
	}
	snaps.expand = g.ExpandSnapshot
	if err := CheckStored(g.Name, snaps, g.Log, g.Stable); err != nil {
		return nil, nil, err
	}
	rc := *g.Config
	rc.LocalID = raft.ServerID(g.NodeID)
	rc.Logger = RaftLogger(g.Logger, g.Name)
	stable := termGuard{g.Stable, g.Logger, g.Name}
	r, err := raft.NewRaft(&rc, g.FSM, g.Log, stable, snaps, watch(g.Transport, g.Followers))
	if err != nil {
		return nil, nil, fmt.Errorf("group %s: start raft: %w", g.Name, err)
	}
	// Raft restored its newest snapshot, if any, while it started: from
	// now on it opens snapshots to send them, or to install one a peer
	// sent.
	snaps.started.Store(true)
	return r, snaps, nil
}

// StopGroup shuts r down and waits up to timeout for it. It closes the
// transport first (when it can be closed), so that Raft's goroutines
// wait out no RPC in flight. When Raft has not stopped in time it returns
// an error: Raft may still write the group's log, so the caller must keep
// it open.
func StopGroup(r *raft.Raft, transport raft.Transport, timeout time.Duration) error {
	shutdown := r.Shutdown()
	if t, ok := transport.(raft.WithClose); ok {
		t.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := Await(ctx, nil, shutdown); err != nil {
		return fmt.Errorf("raft did not shut down within %v: %w", timeout, err)
	}
	return nil
}

// termKey is the stable key under which hashicorp/raft keeps its current
// term.
const termKey = "CurrentTerm"

// termGuard keeps a group whose store failed from taking the process
// down. hashicorp/raft panics when it cannot store a new term (every other
// failed write it answers or steps down on), and it comes to one soon
// after its store fails: at its next election, or the first message of a
// newer leader. The store's owner has been told of the failure by then
// (the node log's OnFail, the metadata store's) and is stopping the group;
// so instead of the panic the goroutine that asked ends, with
// runtime.Goexit, whose deferred calls let Raft's shutdown find every
// goroutine of its own done (when the asker is the transport's heartbeat
// handler, that heartbeat goes unanswered). The term was not stored, so
// nothing acts on it.
type termGuard struct {
	raft.StableStore
	logger *slog.Logger
	name   string
}

func (s termGuard) SetUint64(key []byte, val uint64) error {
	err := s.StableStore.SetUint64(key, val)
	if err != nil && string(key) == termKey {
		s.logger.Error("cannot store a new term: the group takes no more part until the node starts again",
			"group", s.name, "term", val, "err", err)
		runtime.Goexit()
	}
	return err
}
