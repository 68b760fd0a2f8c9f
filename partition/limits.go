package partition

import "github.com/raftbus/raftbus/engine"

// Byte limits on the way of a partition's commands through Raft.
//
// A command travels inside a log entry, and entries travel to followers in
// AppendEntries requests, each one gRPC message that a follower's server
// accepts only up to its receive limit (cluster.MaxMessageBytes, 110 MiB).
// hashicorp/raft (v1.7.3, replication.go: setNewLogs) fills a request with
// up to MaxAppendEntries entries whatever their size, and sends a request
// the follower refused again, unchanged, for ever: one request over the
// limit wedges the follower, and with it, once the follower is needed for
// a quorum, the partition. So the bytes are bounded here, by construction:
//
//	message  ≤ engine.MaxMaxMessageSizeInKilobytes        =    1 MiB
//	command  ≤ MaxCommandBytes = message + 64 KiB envelope = 1088 KiB
//	entry    ≤ MaxEntryBytes                               = 1152 KiB
//	request  ≤ MaxAppendEntries × (MaxEntryBytes + 64 B) + 4 KiB
//	         = 16 × (1152 KiB + 64 B) + 4 KiB              ≈   18 MiB
//
// The 64 bytes are what the transport adds to each entry (index, term,
// type, time, framing), the 4 KiB its request header (group name, leader,
// commit index). A request thus stays six times under the receive limit,
// and small enough to be written by a follower well within the transport's
// RPC timeout (10 s) on a slow disk; entries of small commands still
// travel sixteen to a request, each holding up to MaxCommandsPerEntry.
// Apply refuses a command larger than MaxCommandBytes before anything is
// proposed (MESSAGE_SIZE_EXCEEDED), and the proposer packs commands into
// an entry only while they fit in MaxEntryBytes; entries Raft writes
// itself (configuration, no-op, barrier) are tiny.
//
// A leader holds the requests its pipelines have in flight: raftgrpc
// bounds their bytes per pipeline, so that memory is bounded too.
// Snapshots travel in chunks of their own (raftgrpc, 256 KiB).
const (
	// MaxCommandBytes is the largest encoded command a partition takes:
	// room for a message of the largest size an entity may accept, or a
	// batch of messages as large, with the command's envelope.
	MaxCommandBytes = engine.MaxMaxMessageSizeInKilobytes<<10 + 64<<10
	// MaxEntryBytes bounds one Raft log entry of a partition: a command of
	// the largest size, or smaller ones together.
	MaxEntryBytes = 1152 << 10
	// MaxAppendEntries is Raft's MaxAppendEntries for partitions: the most
	// entries one AppendEntries request carries.
	MaxAppendEntries = 16
	// MaxAppendEntriesBytes bounds one AppendEntries request of a
	// partition as the transport encodes it; the gRPC servers of the
	// nodes must accept messages this large.
	MaxAppendEntriesBytes = MaxAppendEntries*(MaxEntryBytes+transportBytesPerEntry) + transportBytesPerRequest

	transportBytesPerEntry   = 64
	transportBytesPerRequest = 4 << 10
	// commandFraming is what a command adds to an entry beyond its own
	// encoding before the proposer stamps it: its field tag and length,
	// and the time, token seed and engine version the proposer fills in.
	commandFraming = 48
)

// A command of the largest size must fit in an entry of its own: this
// constant does not compile (it overflows uint) otherwise.
const _ = uint(MaxEntryBytes - MaxCommandBytes - commandFraming)
