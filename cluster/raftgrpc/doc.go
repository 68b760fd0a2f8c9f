// Package raftgrpc is the Raft transport of a raftbus node: a
// raft.Transport over gRPC in which the Raft traffic of every group between
// two nodes (the metadata group and every partition) shares one gRPC
// connection, each request naming its group.
//
// A node makes one Mux. The Mux owns the client connections to its peers
// (one per peer address, dialled lazily and reused by every group) and the
// server side of raftbus.raft.v1.RaftTransportService, which the node
// registers on its single gRPC server. Mux.Transport(group) returns the
// raft.Transport of one group; the node hands it to raft.NewRaft.
//
// Every RPC may carry metadata saying who calls (Config.Outgoing, per
// target server) and be vetted by the receiver before Raft sees it
// (Config.Admit): the node uses them to keep nodes of another cluster, or
// a wiped node under an old id, out of its Raft groups.
//
// The package owns no Raft state and no listener: it neither starts nor stops
// the gRPC server, and it decides nothing about which groups run where.
package raftgrpc
