// Package idle keeps what auto_delete_on_idle needs: when this node last
// served a call touching each entity (Tracker), and which entities every
// node's answers show idle for their setting (Candidates, Due).
//
// What a node notes is not replicated, on purpose: it changes with every
// call, and writing it through Raft would cost a log entry per access.
// It may be lost instead, and every loss only ever delays a deletion:
// a node reports no entity idle for longer than it has been running, so
// a restart counts as an access; the metadata leader deletes only when
// every member answered, so a node it cannot hear from counts as one
// too; and a call in progress (a receive's long poll) keeps its entity in
// use until it ends. The calls are noted where they enter the node (its
// public services), so a change of a partition's leader loses nothing.
//
// The package decides nothing about deleting beyond that; committing the
// deletion, guarded by the entity's incarnation and generation so that a
// re-created or changed entity is never deleted, is the node's business.
package idle
