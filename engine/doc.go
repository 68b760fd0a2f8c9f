// Package engine is the messaging state machine of one partition: queues,
// topics, subscriptions, sessions, scheduling, locks and settlement as
// Service Bus defines them.
//
// It is pure and deterministic. A command carries its timestamp and the
// seed its lock tokens are derived from; applying the same commands in the
// same order gives the same state and results on every replica. The package
// does no I/O, reads no clock, draws no random numbers and starts no
// goroutines; Raft, disks and networks belong to the packages above it.
//
// An Engine holds entities: this partition's slice of a queue, a topic or a
// subscription ("<topic>/subscriptions/<name>"). Each entity has a main
// queue and a dead-letter sub-queue, both instances of queue: a log of
// messages in the order their sequence numbers were handed out (a
// dead-lettered message keeps its number and takes its place by it), with
// indexes for available, locked, deferred and scheduled messages and heaps
// for lock expiry, activation and time to live. The
// main queue of an entity that requires sessions is also indexed by
// session (session.go): each session's messages in processing order, the
// sessions ready to accept by their oldest available message, and held
// sessions by lock expiry, one more time effect. A message locked under a
// held session has no lock expiry of its own: the session lock covers it. Time effects are applied
// at their own due times, before each command, so results do not depend
// on whether a Tick ran; NextDeadline tells the leader when the next one
// is due.
//
// A topic accepts sends as a queue does (duplicate detection, time to live,
// size limits, scheduling) but keeps only its scheduled messages. A message
// is given its sequence number and enqueue time by the topic and copied,
// keeping both, into every subscription one of whose rules accepts it; a
// scheduled one is copied when it activates. The copies share the body, so
// a body is held once per partition; the topic counts the bytes its
// subscriptions hold with each shared body once. Rules are compiled by
// engine/sqlfilter when they are created (a malformed one is refused then)
// and apply to messages sent afterwards; a filter or action that fails to
// evaluate dead-letters the copy unless the subscription turned that off.
//
// A command also carries the engine version of the leader that proposed
// it (see Version); the engine gives it the meaning it had in that
// version, so that entries replay as they were first applied.
//
// A receive may carry a receive id chosen by the receiver. The engine keeps
// a receipt of what it received (receipt.go) for the entity's lock
// duration, at least 30 seconds, within bounds of count and size, so that
// a receive repeated after its answer was lost gets the same messages back
// (still locked, or the ones it removed) instead of new ones.
//
// Configuration commands (ConfigureEntity, AddRule, RemoveRule) carry the
// metadata generation of the entity definition they were made from; the
// engine refuses those older than one it applied, so a leader with an
// outdated view of the metadata cannot undo a newer definition (fence.go).
//
// The commands and results are the protobuf messages of
// proto/raftbus/engine/v1; Snapshot writes the state as a stream of
// snapshot records (also there), which Digest hashes.
package engine
