// Package meta is the state machine of a cluster's metadata Raft group:
// the cluster's members, its entity definitions and where each partition's
// replicas are placed. Like the engine it is deterministic: time comes in
// the command, placement is a pure function of committed state, and nothing
// in Apply depends on map order.
package meta

import (
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// ReplicationFactor is how many replicas a partition has when the cluster
// has that many nodes (otherwise every node holds one).
const ReplicationFactor = 3

// FSM is the metadata state machine. Reads go through View; every applied
// command wakes the channel returned by Changes.
type FSM struct {
	mu      sync.RWMutex
	state   *clusterv1.MetaSnapshot
	changed chan struct{}

	// entities holds the copies Entity handed out since the last applied
	// command: every send and settle looks its entity up, and copying a
	// partitioned entity's placement each time showed in profiles.
	entitiesMu sync.Mutex
	entities   map[string]*clusterv1.Entity
}

// NewFSM returns the empty state.
func NewFSM() *FSM {
	return &FSM{state: &clusterv1.MetaSnapshot{}, changed: make(chan struct{}), entities: make(map[string]*clusterv1.Entity)}
}

// View calls fn with the current state. fn must not keep or modify it.
func (f *FSM) View(fn func(s *clusterv1.MetaSnapshot)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// Entity returns a copy of the named entity, or nil. The copy is shared
// with other callers until the next applied command: it must not be
// modified.
func (f *FSM) Entity(name string) *clusterv1.Entity {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.entitiesMu.Lock()
	out, ok := f.entities[name]
	f.entitiesMu.Unlock()
	if ok {
		return out
	}
	e := FindEntity(f.state, name)
	if e == nil {
		return nil
	}
	out = proto.Clone(e).(*clusterv1.Entity)
	f.entitiesMu.Lock()
	f.entities[name] = out
	f.entitiesMu.Unlock()
	return out
}

// Changes returns a channel closed at the next applied command.
func (f *FSM) Changes() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

// notify wakes the waiters on Changes and forgets the copies Entity
// handed out. The caller holds mu for writing.
func (f *FSM) notify() {
	f.entitiesMu.Lock()
	clear(f.entities)
	f.entitiesMu.Unlock()
	close(f.changed)
	f.changed = make(chan struct{})
}

// Apply applies one log entry and returns its *clusterv1.MetaResult.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return &clusterv1.MetaResult{}
	}
	cmd := &clusterv1.MetaCommand{}
	if err := proto.Unmarshal(l.Data, cmd); err != nil {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "decode metadata command: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	return apply(f.state, cmd, l.Index)
}

func apply(s *clusterv1.MetaSnapshot, cmd *clusterv1.MetaCommand, index uint64) *clusterv1.MetaResult {
	now := timestamppb.New(time.UnixMilli(cmd.GetNowUnixMs()))
	switch b := cmd.GetBody().(type) {
	case *clusterv1.MetaCommand_SetClusterId:
		if s.ClusterId == "" {
			s.ClusterId = b.SetClusterId.GetClusterId()
		}
		return &clusterv1.MetaResult{}
	case *clusterv1.MetaCommand_AddNode:
		n := b.AddNode.GetNode()
		if n.GetNodeId() == "" || n.GetAddress() == "" {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "a node needs an id and an address")
		}
		i, found := slices.BinarySearchFunc(s.Nodes, n.GetNodeId(), func(x *clusterv1.Node, id string) int { return strings.Compare(x.NodeId, id) })
		if found {
			m := s.Nodes[i]
			if m.Membership == raftbusv1.NodeMembership_NODE_MEMBERSHIP_REMOVED {
				return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "%s", RemovedMessage(m.NodeId))
			}
			// An incarnation is recorded once: a member that comes back
			// with another has a new data dir and must not be let in
			// under its old id.
			if inc := n.GetIncarnation(); inc != "" && m.Incarnation != "" && inc != m.Incarnation {
				return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
					"node %s is a member with data dir incarnation %s, not %s", m.NodeId, m.Incarnation, inc)
			}
			m.Address = n.GetAddress()
			if m.Incarnation == "" {
				m.Incarnation = n.GetIncarnation()
			}
		} else {
			s.Nodes = slices.Insert(s.Nodes, i, proto.Clone(n).(*clusterv1.Node))
		}
		return &clusterv1.MetaResult{}
	case *clusterv1.MetaCommand_PutQueue:
		return putQueue(s, b.PutQueue, now, index)
	case *clusterv1.MetaCommand_PutTopic:
		return putTopic(s, b.PutTopic, now, index)
	case *clusterv1.MetaCommand_PutSubscription:
		return putSubscription(s, b.PutSubscription, now)
	case *clusterv1.MetaCommand_DeleteSubscription:
		return deleteSubscription(s, b.DeleteSubscription)
	case *clusterv1.MetaCommand_PutRule:
		return putRule(s, b.PutRule, now)
	case *clusterv1.MetaCommand_DeleteRule:
		return deleteRule(s, b.DeleteRule)
	case *clusterv1.MetaCommand_DeleteEntity:
		i, found := entityIndex(s, b.DeleteEntity.GetName())
		if !found {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "entity %q does not exist", b.DeleteEntity.GetName())
		}
		if fail := checkGuard(s.Entities[i], b.DeleteEntity.GetGuard()); fail != nil {
			return fail
		}
		s.Entities = slices.Delete(s.Entities, i, i+1)
		deletePoliciesOf(s, b.DeleteEntity.GetName())
		return &clusterv1.MetaResult{}
	case *clusterv1.MetaCommand_PutAccessPolicy:
		return putAccessPolicy(s, b.PutAccessPolicy, now)
	case *clusterv1.MetaCommand_DeleteAccessPolicy:
		return deleteAccessPolicy(s, b.DeleteAccessPolicy)
	case *clusterv1.MetaCommand_SetNodeMembership:
		return setNodeMembership(s, b.SetNodeMembership)
	case *clusterv1.MetaCommand_MoveReplica:
		return moveReplica(s, b.MoveReplica)
	case *clusterv1.MetaCommand_FinishMove:
		return finishMove(s, b.FinishMove)
	case *clusterv1.MetaCommand_SetPreferredLeader:
		return setPreferredLeader(s, b.SetPreferredLeader)
	case *clusterv1.MetaCommand_RedirectMove:
		return redirectMove(s, b.RedirectMove)
	default:
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "unknown metadata command %T", b)
	}
}

// checkGuard refuses a guarded deletion of e when e is not the entity, in
// the state, that the guard names: it was created again or changed since
// the deletion was decided.
func checkGuard(e *clusterv1.Entity, g *clusterv1.EntityGuard) *clusterv1.MetaResult {
	if g == nil || g.GetIncarnation() == e.GetIncarnation() && g.GetGeneration() == e.GetGeneration() {
		return nil
	}
	return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "entity %q changed since the deletion was decided (incarnation %d, generation %d; now %d, %d)",
		e.GetName(), g.GetIncarnation(), g.GetGeneration(), e.GetIncarnation(), e.GetGeneration())
}

func putQueue(s *clusterv1.MetaSnapshot, put *clusterv1.PutQueue, now *timestamppb.Timestamp, index uint64) *clusterv1.MetaResult {
	q := proto.Clone(put.GetQueue()).(*raftbusv1.QueueProperties)
	i, found := entityIndex(s, q.GetName())
	if put.GetCheckForwarding() && (put.GetCreate() && !found || !put.GetCreate() && found && s.Entities[i].GetKind() == clusterv1.EntityKind_ENTITY_KIND_QUEUE) {
		g := &forwardGraph{s: s, path: q.GetName(), forwardTo: q.GetForwardTo(), forwardDLQ: q.GetForwardDeadLetteredMessagesTo()}
		if fail := checkForwarding(g); fail != nil {
			return fail
		}
	}
	if put.GetCreate() {
		if found {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "entity %q already exists", q.GetName())
		}
		if !slices.ContainsFunc(s.Nodes, Active) {
			return failure(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY, "the cluster has no active members yet")
		}
		q.CreatedAt, q.UpdatedAt = now, now
		e := &clusterv1.Entity{
			Name:        q.GetName(),
			Kind:        clusterv1.EntityKind_ENTITY_KIND_QUEUE,
			Queue:       q,
			Incarnation: index,
			Generation:  1,
			Partitions:  Place(s.Nodes, q.GetName(), q.GetPartitionCount()),
		}
		s.Entities = slices.Insert(s.Entities, i, e)
		return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity)}
	}
	if !found || s.Entities[i].GetKind() != clusterv1.EntityKind_ENTITY_KIND_QUEUE {
		return failure(raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND, "queue %q does not exist", q.GetName())
	}
	e := s.Entities[i]
	old := e.GetQueue()
	switch {
	case old.GetRequiresSession() != q.GetRequiresSession():
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "requires_session of queue %q is fixed at creation", q.GetName())
	case old.GetRequiresDuplicateDetection() != q.GetRequiresDuplicateDetection():
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "requires_duplicate_detection of queue %q is fixed at creation", q.GetName())
	case old.GetPartitionCount() != q.GetPartitionCount():
		return failure(raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "partition_count of queue %q is fixed at creation", q.GetName())
	}
	q.CreatedAt, q.UpdatedAt = old.GetCreatedAt(), now
	e.Queue = q
	e.Generation++
	return &clusterv1.MetaResult{Entity: proto.Clone(e).(*clusterv1.Entity)}
}

// Place spreads the replicas of an entity's partitions over the active
// members among nodes (sorted by id): partition i starts at a node chosen
// by the entity's name plus i and takes the next ReplicationFactor nodes,
// so partitions of one entity, and entities, land on different nodes
// first.
func Place(members []*clusterv1.Node, name string, partitions uint32) []*clusterv1.Placement {
	nodes := slices.DeleteFunc(slices.Clone(members), func(m *clusterv1.Node) bool { return !Active(m) })
	rf := min(ReplicationFactor, len(nodes))
	h := fnv.New32a()
	h.Write([]byte(name))
	start := int(h.Sum32() % uint32(len(nodes)))
	out := make([]*clusterv1.Placement, partitions)
	for i := range out {
		p := &clusterv1.Placement{}
		for k := 0; k < rf; k++ {
			p.NodeIds = append(p.NodeIds, nodes[(start+i+k)%len(nodes)].GetNodeId())
		}
		out[i] = p
	}
	return out
}

// Snapshot captures the state for Raft.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := proto.Marshal(f.state)
	if err != nil {
		return nil, fmt.Errorf("meta: snapshot: %w", err)
	}
	return snapshot(b), nil
}

// Restore replaces the state with a snapshot's.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("meta: restore: %w", err)
	}
	s := &clusterv1.MetaSnapshot{}
	if err := proto.Unmarshal(b, s); err != nil {
		return fmt.Errorf("meta: restore: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = s
	f.notify()
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return fmt.Errorf("meta: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshot) Release() {}

func failure(reason raftbusv1.ErrorReason, format string, args ...any) *clusterv1.MetaResult {
	return &clusterv1.MetaResult{ErrorReason: reason, ErrorMessage: fmt.Sprintf(format, args...)}
}

func entityIndex(s *clusterv1.MetaSnapshot, name string) (int, bool) {
	return slices.BinarySearchFunc(s.Entities, name, func(e *clusterv1.Entity, n string) int { return strings.Compare(e.Name, n) })
}

// FindEntity returns the named entity of s, or nil.
func FindEntity(s *clusterv1.MetaSnapshot, name string) *clusterv1.Entity {
	if i, ok := entityIndex(s, name); ok {
		return s.Entities[i]
	}
	return nil
}
