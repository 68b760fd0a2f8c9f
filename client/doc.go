// Package client is the Go SDK for raftbus, shaped like the Azure SDK for Go
// (azservicebus): a Client, Senders, Receivers, SessionReceivers and
// Processors. It talks to the cluster only through the public gRPC API in
// proto/raftbus/v1 and never imports server packages.
//
// # Routing
//
// The client caches each entity's routing table (AdminService
// GetRoutingTable) and sends a call about one partition straight to that
// partition's leader with the metadata "raftbus-forward: never". A node
// that no longer leads answers NOT_LEADER naming the leader, which the
// client follows at once and remembers; when no leader is known or a node
// cannot be reached, the table is fetched again. Calls that span
// partitions (a receive or peek of a partitioned entity) go to any node,
// which forwards them.
//
// # Retries
//
// Failures the server marks retryable (no leader yet, a leader change, a
// busy node, an unreachable node) are retried with exponential backoff and
// jitter, bounded by RetryOptions and the caller's context. A call that
// failed before it reached a node (no connection could be made, told by
// gRPC's Peer call option, see internal/rpcreach) did nothing and is sent
// again. A change whose outcome is unknown (CodeOutcomeUnknown: the leader
// was lost or the connection broke after the request left) is repeated
// only where that is safe: settlement, lock and session renewal, session
// state, cancelling scheduled messages, accepting the next available
// session, and receives. Every settlement carries a settlement id, kept by
// its repeats: the broker answers a repeat of one that took effect with
// success, and a repeat that finds its lock gone otherwise reports the
// unknown outcome, not a lost lock (the first attempt may have settled it
// and been forgotten); another call for a message already settled fails
// with CodeLockLost. Every receive carries a receive id, kept by its repeats: the
// broker answers a repeat with what the first attempt received (the
// messages still locked, delivery counts not raised again, or in
// ReceiveAndDelete mode the messages it removed) instead of receiving
// more; across partitions the client then asks every partition for what
// it received under the id (a replay). Sends and schedules are repeated
// only when the entity detects duplicates and every message carries a
// MessageID, so that the broker drops the second copy; otherwise the
// caller gets the error and decides. Accepting a named session and entity
// changes (client/admin) are never repeated after an unknown outcome.
//
// # Errors
//
// Every failure is an *Error with a Code (the API's ErrorReason), a
// Message, a TrackingID to find it in the server's logs, and whether it is
// Retryable. errors.Is(err, ErrLockLost) and the other Err values compare
// by Code. When the caller's context ends during retries, the error is
// both the context's error and the last *Error. An error names the node
// the failed call went to, and an operation tried more than once fails
// with its trail (Error.Attempts, also in the error's text): each
// attempt's node, failure, and whether it may have taken effect.
package client
