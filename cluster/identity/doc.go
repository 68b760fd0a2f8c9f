// Package identity is who a node is, beyond its name: the cluster its
// data dir belongs to and the incarnation of that data dir, a UUID drawn
// each time the data dir is created (etcd's member ids and Kafka's
// KIP-853 directory ids are the models). A node whose data dir was wiped
// comes back under its old id having forgotten its votes and the entries
// it helped commit; as a voter it could elect a leader that lacks
// committed entries. Its new incarnation gives it away.
//
// The package owns the data dir's record (node.json), the gRPC metadata
// by which every call between nodes says who makes it and whom it is
// meant for, and the check a receiving node makes of that metadata. It
// knows nothing of Raft or of the membership's storage: the node passes
// in what its committed membership says.
package identity
