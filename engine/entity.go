package engine

import (
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Defaults and limits of queue settings, as in Service Bus.
const (
	DefaultLockDuration     = time.Minute
	MaxLockDuration         = 5 * time.Minute
	DefaultMaxDeliveryCount = 10
	// UnlimitedTimeToLive is the default time to live: the longest
	// time.Duration (about 292 years). Longer settings mean the same.
	UnlimitedTimeToLive              = time.Duration(math.MaxInt64)
	DefaultDuplicateDetectionWindow  = 10 * time.Minute
	MinDuplicateDetectionWindow      = 20 * time.Second
	MaxDuplicateDetectionWindow      = 7 * 24 * time.Hour
	DefaultMaxSizeInMegabytes        = 1024
	DefaultMaxMessageSizeInKilobytes = 256
	DefaultPartitionCount            = 1
	// MinAutoDeleteOnIdle is the shortest auto_delete_on_idle, as in
	// Service Bus; NeverAutoDelete, the default, turns it off.
	MinAutoDeleteOnIdle               = 5 * time.Minute
	NeverAutoDelete                   = time.Duration(math.MaxInt64)
	maxMessageIDLength                = 128
	reasonMaxDeliveryCountExceeded    = "MaxDeliveryCountExceeded"
	reasonTTLExpired                  = "TTLExpiredException"
	descriptionMaxDeliveryCount       = "Message could not be consumed after the maximum number of delivery attempts."
	descriptionTTLExpired             = "The message expired and was dead lettered."
	deadLetterFromDeadLetterQueueText = "a message cannot be dead-lettered from the dead-letter sub-queue"
)

// Limits of the message size setting.
const (
	// MaxMaxMessageSizeInKilobytes is the largest message size an entity
	// may be given: the largest message raftbus replicates (see
	// partition/limits.go). Service Bus accepts up to 256 KB in its
	// standard tier and 1 MB by default in premium.
	MaxMaxMessageSizeInKilobytes = 1024
	// legacyMaxMessageSizeInKilobytes is the limit entities could be
	// created with before; the engine still applies such settings (stored
	// definitions, log entries, snapshots), and partitions refuse the
	// messages too large to replicate before they reach it.
	legacyMaxMessageSizeInKilobytes = 102400
)

// NormalizeQueueProperties returns a copy of p with every unset setting at
// its default, or an INVALID_ARGUMENT error naming the first setting out of
// range. The name and metadata fields are copied as they are.
func NormalizeQueueProperties(p *raftbusv1.QueueProperties) (*raftbusv1.QueueProperties, error) {
	return normalizeQueueProperties(p, MaxMaxMessageSizeInKilobytes)
}

// normalizeQueueProperties is NormalizeQueueProperties with maxMessageKB
// as the limit of max_message_size_in_kilobytes.
func normalizeQueueProperties(p *raftbusv1.QueueProperties, maxMessageKB int64) (*raftbusv1.QueueProperties, error) {
	if p == nil {
		p = &raftbusv1.QueueProperties{}
	}
	n := proto.Clone(p).(*raftbusv1.QueueProperties)
	var err error
	if n.LockDuration, err = durationSetting("lock_duration", n.LockDuration, DefaultLockDuration, time.Millisecond, MaxLockDuration); err != nil {
		return nil, err
	}
	if n.MaxDeliveryCount == nil {
		n.MaxDeliveryCount = proto.Int32(DefaultMaxDeliveryCount)
	} else if n.GetMaxDeliveryCount() < 1 {
		return nil, invalidf("max_delivery_count must be at least 1, not %d", n.GetMaxDeliveryCount())
	}
	if n.RequiresSession == nil {
		n.RequiresSession = proto.Bool(false)
	}
	if n.DefaultMessageTimeToLive, err = durationSetting("default_message_time_to_live", n.DefaultMessageTimeToLive, UnlimitedTimeToLive, time.Millisecond, UnlimitedTimeToLive); err != nil {
		return nil, err
	}
	if n.DeadLetteringOnMessageExpiration == nil {
		n.DeadLetteringOnMessageExpiration = proto.Bool(false)
	}
	if n.RequiresDuplicateDetection == nil {
		n.RequiresDuplicateDetection = proto.Bool(false)
	}
	if n.DuplicateDetectionHistoryTimeWindow, err = durationSetting("duplicate_detection_history_time_window",
		n.DuplicateDetectionHistoryTimeWindow, DefaultDuplicateDetectionWindow, MinDuplicateDetectionWindow, MaxDuplicateDetectionWindow); err != nil {
		return nil, err
	}
	if n.MaxSizeInMegabytes == nil {
		n.MaxSizeInMegabytes = proto.Int64(DefaultMaxSizeInMegabytes)
	} else if v := n.GetMaxSizeInMegabytes(); v < 1 || v > 1<<30 {
		return nil, invalidf("max_size_in_megabytes must be between 1 and %d, not %d", 1<<30, v)
	}
	if n.MaxMessageSizeInKilobytes == nil {
		n.MaxMessageSizeInKilobytes = proto.Int64(DefaultMaxMessageSizeInKilobytes)
	} else if v := n.GetMaxMessageSizeInKilobytes(); v < 1 || v > maxMessageKB {
		why := ""
		if maxMessageKB == MaxMaxMessageSizeInKilobytes {
			why = ": raftbus replicates messages of at most 1 MiB"
		}
		return nil, invalidf("max_message_size_in_kilobytes must be between 1 and %d, not %d%s", maxMessageKB, v, why)
	}
	if n.EnableBatchedOperations == nil {
		n.EnableBatchedOperations = proto.Bool(true)
	}
	if n.AutoDeleteOnIdle, err = autoDeleteSetting(n.AutoDeleteOnIdle); err != nil {
		return nil, err
	}
	if n.PartitionCount == nil {
		n.PartitionCount = proto.Uint32(DefaultPartitionCount)
	} else if n.GetPartitionCount() < 1 || n.GetPartitionCount() > 1<<16 {
		return nil, invalidf("partition_count must be between 1 and %d, not %d", 1<<16, n.GetPartitionCount())
	}
	return n, nil
}

func durationSetting(name string, d *durationpb.Duration, def, lo, hi time.Duration) (*durationpb.Duration, error) {
	if d == nil {
		return durationpb.New(def), nil
	}
	if err := d.CheckValid(); err != nil {
		return nil, invalidf("%s: %v", name, err)
	}
	if v := d.AsDuration(); v < lo || v > hi {
		return nil, invalidf("%s must be between %v and %v, not %v", name, lo, hi, v)
	}
	return d, nil
}

// autoDeleteSetting normalizes auto_delete_on_idle. The engine does not
// act on it: the metadata leader deletes idle entities (cluster/idle).
func autoDeleteSetting(d *durationpb.Duration) (*durationpb.Duration, error) {
	return durationSetting("auto_delete_on_idle", d, NeverAutoDelete, MinAutoDeleteOnIdle, NeverAutoDelete)
}

// settings are an entity's normalized properties in the form the engine
// uses them.
type settings struct {
	lockDurationMs        int64
	maxDeliveryCount      int32
	defaultTTLMs          int64 // noExpiry when unlimited
	deadLetterOnExpiry    bool
	duplicateDetection    bool
	duplicateWindowMs     int64
	maxSizeBytes          int64
	maxMessageSizeBytes   int64
	requiresSession       bool
	normalizedProperties  *raftbusv1.QueueProperties
	configuredMaxSizeByte int64
	// A topic's or a subscription's settings as configured (see
	// pubSubSettings); normalizedProperties is nil then.
	topicProperties        *raftbusv1.TopicProperties
	subscriptionProperties *raftbusv1.SubscriptionProperties
	// forwardTo and forwardDLQ are the entities the main queue's and the
	// dead-letter sub-queue's messages go to instead (see transfer.go).
	forwardTo, forwardDLQ string
}

func newSettings(c *enginev1.ConfigureEntity) (settings, *Error) {
	if c.GetTopic() != nil || c.GetSubscription() != nil {
		return pubSubSettings(c)
	}
	p, err := normalizeQueueProperties(c.GetProperties(), legacyMaxMessageSizeInKilobytes)
	if err != nil {
		return settings{}, err.(*Error)
	}
	if c.GetMaxSizeBytes() < 0 {
		return settings{}, invalidf("max_size_bytes must not be negative")
	}
	s := settings{
		lockDurationMs:        p.GetLockDuration().AsDuration().Milliseconds(),
		maxDeliveryCount:      p.GetMaxDeliveryCount(),
		defaultTTLMs:          p.GetDefaultMessageTimeToLive().AsDuration().Milliseconds(),
		deadLetterOnExpiry:    p.GetDeadLetteringOnMessageExpiration(),
		duplicateDetection:    p.GetRequiresDuplicateDetection(),
		duplicateWindowMs:     p.GetDuplicateDetectionHistoryTimeWindow().AsDuration().Milliseconds(),
		maxSizeBytes:          c.GetMaxSizeBytes(),
		maxMessageSizeBytes:   p.GetMaxMessageSizeInKilobytes() * 1024,
		requiresSession:       p.GetRequiresSession(),
		normalizedProperties:  p,
		configuredMaxSizeByte: c.GetMaxSizeBytes(),
		forwardTo:             p.GetForwardTo(),
		forwardDLQ:            p.GetForwardDeadLetteredMessagesTo(),
	}
	if s.maxSizeBytes == 0 {
		s.maxSizeBytes = p.GetMaxSizeInMegabytes() << 20
	}
	if s.defaultTTLMs >= UnlimitedTimeToLive.Milliseconds() {
		s.defaultTTLMs = noExpiry
	}
	return s, nil
}

// configuration is the ConfigureEntity that reproduces the settings.
func (s *settings) configuration(path string) *enginev1.ConfigureEntity {
	return &enginev1.ConfigureEntity{EntityPath: path, Properties: s.normalizedProperties, MaxSizeBytes: s.configuredMaxSizeByte,
		Topic: s.topicProperties, Subscription: s.subscriptionProperties}
}

// entity is this partition's slice of a queue: its main queue, its
// dead-letter sub-queue and the message ids remembered for duplicate
// detection.
type entity struct {
	path       string
	settings   settings
	main       *queue
	deadLetter *queue
	duplicates duplicateTable
	// Set for a topic or a subscription (see topic.go).
	topic        *topicState
	subscription *subscriptionState
	// transfersIn is, by source stream, the highest number of a message
	// forwarded to the entity it accepted (see transfer.go).
	transfersIn map[string]streamMark
	// counters are not state (see Counters).
	counters Counters
}

func newEntity(path string, s settings, pins *bodyPins) *entity {
	ent := &entity{path: path, settings: s, duplicates: newDuplicateTable()}
	ent.main = newQueue(ent, false, pins)
	ent.deadLetter = newQueue(ent, true, pins)
	if s.requiresSession {
		ent.main.sessions = newSessionIndex()
	}
	return ent
}

// bytes is what the entity holds in this partition, as its size and
// against MaxSizeInMegabytes: the message ids, bodies and other fields of
// its messages in every state and sub-queue, and its session states. A
// topic holds its scheduled messages, the copies in its subscriptions
// (each shared body once) and their session states.
func (ent *entity) bytes() int64 {
	b := ent.messageBytes() + ent.main.stateBytes()
	if ent.topic != nil {
		for _, sub := range ent.topic.subscriptions {
			b += sub.main.stateBytes()
		}
	}
	return b
}

// messageBytes is bytes without session states: what commands of versions
// before versionQuotaCountsSessionState held against the quota.
func (ent *entity) messageBytes() int64 {
	b := ent.main.bytes + ent.deadLetter.bytes
	if ent.topic != nil {
		b += ent.topic.held
	}
	return b
}

func (ent *entity) queue(sq raftbusv1.SubQueue) (*queue, *Error) {
	switch sq {
	case raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED:
		return ent.main, nil
	case raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER:
		return ent.deadLetter, nil
	}
	return nil, invalidf("unknown sub-queue %d", int32(sq))
}

// duplicateTable remembers message ids until their detection window ends.
// The map answers lookups; the FIFO, in insertion order, drives pruning and
// gives snapshots a deterministic order. A FIFO entry whose expiry no longer
// matches the map (the id was remembered again later) is stale.
type duplicateTable struct {
	ids  map[string]firstCopy
	fifo []duplicateEntry
	head int
}

// firstCopy is what the first message with an id got, so that a duplicate
// (most often a send repeated after an unknown outcome) is answered as the
// first was: with its sequence number and enqueue time.
type firstCopy struct {
	expiresMs  int64
	seq        int64
	enqueuedMs int64
	scheduled  bool
}

type duplicateEntry struct {
	id        string
	expiresMs int64
}

func newDuplicateTable() duplicateTable {
	return duplicateTable{ids: make(map[string]firstCopy)}
}

// seen is the first copy of id if it was sent within its window.
func (d *duplicateTable) seen(id string, now int64) (firstCopy, bool) {
	c, ok := d.ids[id]
	return c, ok && c.expiresMs > now
}

func (d *duplicateTable) remember(id string, c firstCopy) {
	d.ids[id] = c
	d.fifo = append(d.fifo, duplicateEntry{id, c.expiresMs})
}

// next is the earliest time an id is forgotten.
func (d *duplicateTable) next() (int64, bool) {
	if d.head < len(d.fifo) {
		return d.fifo[d.head].expiresMs, true
	}
	return 0, false
}

// prune forgets ids whose window ended at or before now. Entries are
// dropped in FIFO order; an entry behind one that expires later waits
// (lookups check the expiry, so this only delays freeing memory).
func (d *duplicateTable) prune(now int64) {
	for d.head < len(d.fifo) && d.fifo[d.head].expiresMs <= now {
		e := d.fifo[d.head]
		if d.ids[e.id].expiresMs == e.expiresMs {
			delete(d.ids, e.id)
		}
		d.fifo[d.head] = duplicateEntry{}
		d.head++
	}
	if d.head > 64 && d.head*2 > len(d.fifo) {
		n := copy(d.fifo, d.fifo[d.head:])
		clear(d.fifo[n:])
		d.fifo = d.fifo[:n]
		d.head = 0
	}
}

// live calls f for every id remembered after now, in FIFO order.
func (d *duplicateTable) live(now int64, f func(id string, c firstCopy)) {
	for _, e := range d.fifo[d.head:] {
		if c := d.ids[e.id]; e.expiresMs > now && c.expiresMs == e.expiresMs {
			f(e.id, c)
		}
	}
}
