// Package partition runs one partition: a hashicorp/raft group whose finite
// state machine is an engine instance, with its bbolt log and stable store
// and file snapshots under the node's data directory.
//
// It is the only place where Raft meets messaging semantics. The leader
// stamps time (from the node's Clock, never going back, and not at all
// while the node's clock is not trusted) and lock tokens into commands, batches proposals, proposes
// Ticks when the engine has time-driven work due, wakes long-polling
// receivers and serves reads after confirming its leadership. It knows
// nothing of other partitions, of nodes or of gRPC services.
package partition
