package partition

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
)

// Config describes one replica of a partition.
type Config struct {
	// Name identifies the partition in logs and errors, e.g. "orders/3". It
	// is also the Raft group id on the transport.
	Name string
	// PartitionID and PartitionCount shape sequence numbers (see engine.New).
	PartitionID    uint32
	PartitionCount uint32

	// NodeID is this replica's Raft server id (the node id).
	NodeID string
	// Dir holds this replica's snapshots. Created if missing.
	Dir string
	// Log and Stable are this replica's Raft log and stable store (term,
	// vote): a node keeps them in its node log (raftlog.Group). Open does
	// not close them.
	Log    raft.LogStore
	Stable raft.StableStore
	// OnDamage, when set, is called when the replica finds its stored
	// state damaged while it runs (a snapshot that fails its checksum when
	// read to be sent). The replica must then be closed and rebuilt.
	OnDamage func(err error)
	// Transport carries this group's Raft RPCs.
	Transport raft.Transport
	// Clock is where the leader reads the time it stamps into commands;
	// nil is the machine's wall clock, always trusted.
	Clock Clock
	// Bootstrap, when set and the replica has no state on disk, makes it
	// start the group with these voters. Every initial replica may be given
	// the same list; Raft tolerates repeated bootstraps of one configuration.
	Bootstrap []raft.Server
	// Campaign makes a replica that bootstraps a new group stand for
	// election as soon as it starts, instead of after a heartbeat timeout
	// (half a second to a second). Give it to one founder of the group:
	// its preferred leader. Its transport must implement ElectNow (see
	// raftgrpc.GroupTransport); otherwise the replica waits as the others do.
	Campaign bool

	// Elect makes the replica stand for election as soon as it has
	// started, whatever it holds: for a group every replica had closed
	// after quiescing (see quiesce.go), opened again for a request. Its
	// transport must implement ElectNow, as for Campaign.
	Elect bool

	// OnLeading, when set, is called each time the replica has become
	// leader and applied everything committed before (it serves from
	// then on), on the replica's own goroutine: it must not block.
	OnLeading func()

	// Timing. Zero values take the defaults below.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout bounds how long a follower may wait for the commit
	// index to advance with no new entries: raft sends each follower an
	// AppendEntries this often when no entries flow.
	CommitTimeout time.Duration
	// IdleAppendHold bounds how long such an AppendEntries waits while it
	// would tell the follower nothing new (see idleappend.go): on an idle
	// partition it is sent about every IdleAppendHold, not every
	// CommitTimeout.
	IdleAppendHold time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// make a snapshot due; TrailingLogs how many entries stay in the log
	// after it (for followers that lag a little).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// ApplyTimeout bounds how long a proposal waits to enter Raft.
	ApplyTimeout time.Duration
	// MaxCommandsPerEntry caps how many commands share one log entry.
	MaxCommandsPerEntry int
	// MaxEntriesInFlight caps the entries the leader has proposed and not
	// yet applied. Commands that come meanwhile wait and share the next
	// entry, so that under load entries grow rather than multiply, and
	// their fixed costs (a log write and an AppendEntries per replica, an
	// apply) are shared by more commands. An idle partition proposes at
	// once. One is the default: with more, a loaded machine spent its CPU
	// on entries of a few commands each, most of all with many partitions
	// (docs/benchmarks.md).
	MaxEntriesInFlight int

	// Logger receives this replica's logs; nil discards them.
	Logger *slog.Logger
	// Observer, when set, is told how long commits and applies take.
	Observer Observer

	// wrapLogStore, when set, wraps the log store Raft writes: how tests
	// stall the disk under a replica.
	wrapLogStore func(raft.LogStore) raft.LogStore
	// quietForRiders is how long the partition must have proposed nothing
	// for waiting receives to ride on its next entry (see riders.go);
	// zero: defaultQuietForRiders, negative: whenever no entry is on its way.
	quietForRiders time.Duration
	// onIdleHold, for tests, is called as an AppendEntries starts to wait
	// for something to tell.
	onIdleHold func(*raft.AppendEntriesRequest)
}

// Clock is the time a leader stamps into the commands it proposes. A node
// whose clock its peers do not vouch for (skewed, or not yet compared)
// answers with an error, and the leader then proposes nothing.
type Clock interface {
	Now() (time.Time, error)
}

// systemClock is the machine's wall clock, for a replica with no node
// around it to check its clock.
type systemClock struct{}

func (systemClock) Now() (time.Time, error) { return time.Now(), nil }

// Defaults tuned for failover within about two seconds on a LAN or
// loopback: a leader is suspected after 500 ms without contact, and an
// election follows within another 500 ms. A leader steps down after as
// long without hearing from a quorum (the lease): raft serves no reads on
// the lease, so a longer one costs no safety, and a shorter one made
// leaders of a busy node step down over heartbeats late by 250-400 ms
// (16 partitions on a saturated 2-core machine), each step-down an
// election and a burst of unknown outcomes.
const (
	DefaultHeartbeatTimeout    = 500 * time.Millisecond
	DefaultElectionTimeout     = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout  = 500 * time.Millisecond
	DefaultCommitTimeout       = 50 * time.Millisecond
	DefaultIdleAppendHold      = 250 * time.Millisecond
	DefaultSnapshotThreshold   = 8192
	DefaultTrailingLogs        = 10240
	DefaultSnapshotInterval    = 30 * time.Second
	DefaultApplyTimeout        = 5 * time.Second
	DefaultMaxCommandsPerEntry = 512
	DefaultMaxEntriesInFlight  = 1
)

func (c *Config) withDefaults() Config {
	out := *c
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setDur(&out.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setDur(&out.ElectionTimeout, DefaultElectionTimeout)
	setDur(&out.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	setDur(&out.CommitTimeout, DefaultCommitTimeout)
	setDur(&out.IdleAppendHold, DefaultIdleAppendHold)
	setDur(&out.SnapshotInterval, DefaultSnapshotInterval)
	setDur(&out.ApplyTimeout, DefaultApplyTimeout)
	if out.SnapshotThreshold == 0 {
		out.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if out.TrailingLogs == 0 {
		out.TrailingLogs = DefaultTrailingLogs
	}
	if out.MaxCommandsPerEntry == 0 {
		out.MaxCommandsPerEntry = DefaultMaxCommandsPerEntry
	}
	if out.MaxEntriesInFlight == 0 {
		out.MaxEntriesInFlight = DefaultMaxEntriesInFlight
	}
	setDur(&out.quietForRiders, defaultQuietForRiders)
	if out.PartitionCount == 0 {
		out.PartitionCount = 1
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Clock == nil {
		out.Clock = systemClock{}
	}
	return out
}

func (c *Config) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("partition config: Name is empty")
	case c.NodeID == "":
		return fmt.Errorf("partition %s: config: NodeID is empty", c.Name)
	case c.Dir == "":
		return fmt.Errorf("partition %s: config: Dir is empty", c.Name)
	case c.Transport == nil:
		return fmt.Errorf("partition %s: config: Transport is nil", c.Name)
	case c.Log == nil || c.Stable == nil:
		return fmt.Errorf("partition %s: config: Log or Stable is nil", c.Name)
	case c.PartitionID >= c.PartitionCount:
		return fmt.Errorf("partition %s: config: partition id %d out of range for %d partitions", c.Name, c.PartitionID, c.PartitionCount)
	}
	return nil
}

// raftConfig is the hashicorp/raft configuration for this replica
// (StartGroup sets its LocalID and Logger).
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.SnapshotInterval = c.SnapshotInterval
	// BatchApplyCh stays off: a future buffered in raft's apply channel
	// when the node shuts down is never answered, which would leave a
	// caller waiting forever. Batching comes from the proposer instead:
	// commands that arrive while one entry is being written share the next.
	// Bounds the bytes of an AppendEntries request (see limits.go).
	rc.MaxAppendEntries = MaxAppendEntries
	return rc
}
