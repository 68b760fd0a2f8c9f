// Package engine is the messaging state machine of one partition: queues,
// topics, subscriptions, sessions, scheduling, locks and settlement as
// Service Bus defines them.
//
// It is pure and deterministic. A command carries its timestamp and any lock
// tokens it needs; applying the same commands in the same order gives the
// same state and results on every replica. The package does no I/O, reads no
// clock, draws no random numbers and starts no goroutines; Raft, disks and
// networks belong to the packages above it.
package engine
