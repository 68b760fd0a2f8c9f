// Package metrics owns a node's Prometheus metrics: what it counts as it
// serves (request latency and errors, Raft commit, apply and fsync
// latency) and what it reads from the node at scrape time (message counts
// and counters per entity and partition, Raft state per group).
//
// Where things are counted, so that a cluster's figures add up:
//   - message counts and counters (sent, received, completed, ...) are
//     those of the partitions this node leads, read from the leader's
//     engine at scrape time: every partition is reported by exactly one
//     node, the one that applied its commands as leader, however the
//     requests reached it.
//   - request latency and errors are counted by the node a client called,
//     not by a node it forwarded the call to (calls between nodes are not
//     counted): each client call is counted once, with the forwarding hop
//     in its latency.
//   - Raft state is reported by every replica, so that a follower's lag
//     shows.
//
// Labels are bounded by the entities and partitions the node holds and the
// API's methods and error reasons; never message ids or lock tokens.
// It must not change what the node does: it only reads and counts.
package metrics
