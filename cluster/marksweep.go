package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/engine"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A partition that accepted forwarded messages keeps a mark per source
// stream, a source partition's Raft group (engine/transfermarks.go). The
// leader has it forget the marks of sources that no longer exist: every
// forgetInterval it looks up the source entity of each stream, and a
// stream whose entity is gone, or was created again (a later
// incarnation), is forgotten once no transfer of it has been accepted
// for forgetStreamsAfter. That wait covers a transfer its forwarder sent
// before the source was deleted: it bounds one send (forwardCallTimeout)
// many times over.
const defaultForgetStreamsAfter = time.Minute

// sweepMarks starts the forgetting of r's marks of deleted sources when
// it is due and none runs.
func (n *Node) sweepMarks(r *replica) {
	if r.sweeping.Load() || time.Since(r.lastSweep) < forgetInterval {
		return
	}
	r.lastSweep = time.Now()
	var streams map[string][]string
	r.p.ReadApplied(func(en *engine.Engine) { streams = en.SourceStreams() })
	if len(streams) == 0 {
		return
	}
	r.sweeping.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer r.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), forwardCallTimeout)
		defer cancel()
		if err := n.forgetDeletedSources(ctx, r, streams); err != nil {
			n.log.Debug("forget the marks of deleted sources", "group", r.group, "err", err)
		}
	}()
}

// forgetDeletedSources has r forget the streams, of the entities they are
// marked in, whose source is deleted.
func (n *Node) forgetDeletedSources(ctx context.Context, r *replica, streams map[string][]string) error {
	paths := make([]string, 0, len(streams))
	for p := range streams {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	deleted := map[string]bool{}
	for _, path := range paths {
		var forget []string
		for _, s := range streams[path] {
			gone, known := deleted[s]
			if !known {
				gone = n.sourceDeleted(ctx, s)
				deleted[s] = gone
			}
			if gone {
				forget = append(forget, s)
			}
		}
		if len(forget) == 0 {
			continue
		}
		cmd := &enginev1.ForgetTransferStreams{EntityPath: path, Streams: forget, UnusedForMs: n.cfg.forgetStreamsAfter.Milliseconds()}
		if _, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_ForgetTransferStreams{ForgetTransferStreams: cmd}}); err != nil {
			return fmt.Errorf("forget %d streams of %s: %w", len(forget), path, err)
		}
	}
	return nil
}

// sourceDeleted reports whether the source of stream, an entity's
// partition group (see groupName), is known to be deleted: the metadata
// leader says no entity of its name exists, or one of a later incarnation
// does. Anything else, a lookup that fails included, keeps the mark.
func (n *Node) sourceDeleted(ctx context.Context, stream string) bool {
	name, incarnation, ok := parseGroupName(stream)
	if !ok {
		return false
	}
	e := n.meta.fsm.Entity(name)
	if e == nil {
		var err error
		if e, err = n.entity(ctx, name); err != nil {
			return apierror.From(err).Reason == raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND
		}
	}
	return e.GetIncarnation() > incarnation
}
