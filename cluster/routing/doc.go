// Package routing is how a call reaches the node that serves it: one
// client connection per peer node (Peers), the last known leader of each
// partition this node does not hold (Leaders), the forwarding of a call to
// a partition's leader that follows NOT_LEADER hints and keeps an unknown
// outcome unknown (Forward, ForwardError), and the metadata that tells a
// node to serve a call itself rather than forward it again.
//
// It knows nodes by address and partitions by Raft group name only: which
// node leads what, and whether this one does, is the node's to say
// (package cluster). It must not import cluster or its services.
package routing
