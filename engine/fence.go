package engine

import (
	"fmt"
	"slices"
	"strings"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Generation fencing.
//
// Entity definitions live in the cluster's metadata, where every change to
// an entity raises its generation; the leader of a partition turns the
// definition it sees into ConfigureEntity, AddRule and RemoveRule commands.
// A leader whose view of the metadata is behind would turn an older
// definition into commands that undo newer ones (deleting a subscription,
// and the messages it holds, that the older view lacks). So each of these
// commands carries the generation of the view it was made from, and the
// engine keeps, per entity, the highest generation it applied: a command
// from an older generation is refused with no effect at all, not even on
// the clock. Commands of one generation (the several commands of one
// reconfiguration) all pass. A topic, its subscriptions and their rules
// share the topic's generation, as they do in the metadata.
//
// The record outlives the entity: a deleted entity is never configured
// again in this partition (an entity created again under the same name is a
// new incarnation with Raft groups of its own).

// fenceOf returns the entity path and generation of a command that is
// fenced by generation; ok is false for the others.
func fenceOf(cmd *enginev1.Command) (path string, generation uint64, ok bool) {
	switch b := cmd.GetBody().(type) {
	case *enginev1.Command_ConfigureEntity:
		return b.ConfigureEntity.GetEntityPath(), b.ConfigureEntity.GetGeneration(), true
	case *enginev1.Command_AddRule:
		return b.AddRule.GetEntityPath(), b.AddRule.GetGeneration(), true
	case *enginev1.Command_RemoveRule:
		return b.RemoveRule.GetEntityPath(), b.RemoveRule.GetGeneration(), true
	}
	return "", 0, false
}

// generationKey is the entity whose generation fences commands on path: a
// subscription's topic, or the entity itself.
func generationKey(path string) string {
	if topic, _, ok := splitSubscriptionPath(path); ok {
		return topic
	}
	return path
}

// checkGeneration refuses a command on path made from an older generation
// than one applied. The reason is SERVER_BUSY, retryable: the command can
// only succeed once made again from a view that has caught up.
func (e *Engine) checkGeneration(path string, generation uint64) *Error {
	key := generationKey(path)
	if applied := e.generations[key]; generation < applied {
		return errorf(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY,
			"configuration of %q made from metadata generation %d refused: generation %d of %q is applied already (the proposing node's view of the metadata is behind)",
			path, generation, applied, key)
	}
	return nil
}

// recordGeneration notes that a command of generation was applied to path.
func (e *Engine) recordGeneration(path string, generation uint64) {
	key := generationKey(path)
	if generation > e.generations[key] {
		e.generations[key] = generation
	}
}

// Generation returns the highest metadata generation applied to the entity
// path belongs to (a subscription belongs to its topic); 0 when none was.
func (e *Engine) Generation(path string) uint64 {
	return e.generations[generationKey(path)]
}

// snapshotGenerations lists the recorded generations in path order, for a
// canonical snapshot.
func (e *Engine) snapshotGenerations() []*enginev1.EntityGeneration {
	out := make([]*enginev1.EntityGeneration, 0, len(e.generations))
	for path, g := range e.generations {
		out = append(out, &enginev1.EntityGeneration{EntityPath: path, Generation: g})
	}
	slices.SortFunc(out, func(a, b *enginev1.EntityGeneration) int { return strings.Compare(a.EntityPath, b.EntityPath) })
	return out
}

// restoreGenerations reads the generations of a snapshot header.
func (e *Engine) restoreGenerations(gs []*enginev1.EntityGeneration) error {
	for i, g := range gs {
		if err := checkPath(g.GetEntityPath()); err != nil {
			return fmt.Errorf("generation of an entity: %w", err)
		}
		if i > 0 && gs[i-1].GetEntityPath() >= g.GetEntityPath() {
			return fmt.Errorf("generation of %q is out of order", g.GetEntityPath())
		}
		e.generations[g.GetEntityPath()] = g.GetGeneration()
	}
	return nil
}
