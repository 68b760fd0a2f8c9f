// Package cluster turns a process into a node of a raftbus cluster: the
// metadata Raft group (entity definitions, partition placement, membership),
// the partitions placed on this node, request routing to partition leaders,
// the public gRPC services and the gRPC Raft transport shared by all groups.
// It pings its peers to judge its own clock (cluster/clock) and keeps nodes
// of another cluster, or a wiped node under an old id, out of its Raft
// groups (cluster/identity).
// It opens the node log (package raftlog) that holds the Raft log of every
// partition replica on the node, and rebuilds from their peers the replicas
// whose stored state fails its checks (rebuild.go).
package cluster
