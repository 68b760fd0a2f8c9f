// Package raftlog is a node's Raft log: one sequence of segment files that
// holds the log entries and stable state (term, vote) of every Raft group
// on the node, each group seeing its own raft.LogStore and
// raft.StableStore (Group).
//
// Why one log per node: a replica with a file of its own pays a sync per
// append, so a node with many replicas pays many syncs for what one could
// cover. Here the writer gathers the appends of every group that arrive
// while a write is under way and makes them durable with one write and one
// sync (group commit); each caller returns only when its own records are
// on disk, but for a Raft leader's appends, which may return once queued
// (Group.StoreLogsQueued) and be awaited later (Group.WaitDurable).
//
// Integrity: every record carries two CRC-32C checksums, one over its
// header and one over its body, and every batch a header of its own.
// Everything is checked when the log is opened and every entry again when
// it is read. A torn tail after a crash (only the last, unsynced batch can
// be torn) is repaired silently; anything else that fails is damage, and
// the groups it may have hurt are refused (DamagedError) until their owner
// drops them and rebuilds them from elsewhere. The log never hands out a
// record that fails its checksum. The file format and the rules that tell
// a torn tail from damage are described in format.go and replay.go.
//
// Space: a group's entries go when raft deletes them (a prefix after a
// snapshot, a suffix on a conflict) or the group is dropped; a segment is
// deleted once no group has a live record in it. A group that keeps an old
// segment alive (an idle one: raft keeps its trailing entries) has its few
// live records there rewritten at the head, so segments do not pile up.
//
// It knows nothing of partitions, nodes or what the entries mean.
package raftlog
