// Package cluster turns a process into a node of a raftbus cluster: it
// owns the node's lifecycle (Start, Shutdown, Close), the metadata Raft
// group (entity definitions, partition placement, membership), the
// partition replicas placed on this node (opened, configured and closed
// as the metadata changes, rebuilt from their peers when their stored
// state fails its checks), and the node service other nodes call. It
// pings its peers to judge its own clock (cluster/clock) and keeps nodes
// of another cluster, or a wiped node under an old id, out of its Raft
// groups (cluster/identity). It opens the node log (package raftlog) that
// holds the Raft log of every partition replica on the node.
//
// Start wires the rest onto one gRPC server: the Raft transport of every
// group (cluster/raftgrpc), and the public services (cluster/service),
// which see the node through service.Node (servicenode.go): its metadata,
// read with read-your-writes or changed at the metadata leader, and its
// partitions, a call served on the local replica or forwarded to the
// leader (cluster/routing). Errors speak cluster/apierror throughout.
//
// A new concern gets a package of its own behind a small interface, with
// this package wiring it; this package must not grow a public service.
package cluster
