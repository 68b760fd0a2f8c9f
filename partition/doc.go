// Package partition runs one partition: a hashicorp/raft group whose finite
// state machine is an engine instance. Its log and stable store are given
// to it (a node keeps them in its node log, package raftlog); its file
// snapshots live in a directory of its own. Stored state that fails its
// checks (ErrDamaged) is refused, never served: a damaged replica is
// rebuilt from its peers by its node.
//
// It is the only place where Raft meets messaging semantics. The leader
// stamps time (from the node's Clock, never going back, and not at all
// while the node's clock is not trusted) and lock tokens into commands, batches proposals, proposes
// Ticks when the engine has time-driven work due, wakes long-polling
// receivers and serves reads after confirming its leadership. It knows
// nothing of other partitions, of nodes or of gRPC services.
package partition
