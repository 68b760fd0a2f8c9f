// Package proto holds the wire contract: the .proto sources (built with buf)
// and their generated Go code, committed. raftbus/v1 is the public API;
// raftbus/raft/v1 is the internal Raft transport between nodes. Regenerate
// with scripts/gen.sh.
package proto
