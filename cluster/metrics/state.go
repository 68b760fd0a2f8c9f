package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftbus/raftbus/partition"
)

// Source is the node as its metrics read it at scrape time.
type Source interface {
	// EachGroup calls fn with the Raft state of every group this node
	// has a replica of: the metadata group as "meta", a partition as
	// "<entity>/<partition id>".
	EachGroup(fn func(group string, s partition.RaftStats))
	// EachLed calls fn with every entity of every partition this node
	// leads (a topic's partition holds the topic and its subscriptions).
	EachLed(fn func(partitionID uint32, e partition.EntityStats))
	// Ready is nil when the node serves, or says why it does not.
	Ready() error
}

var (
	entityLabels = []string{"entity", "partition"}
	groupLabels  = []string{"group"}

	messagesDesc = prometheus.NewDesc("raftbus_entity_messages",
		"Messages an entity holds in a partition this node leads, by state (active counts available and locked ones, as Service Bus does).",
		append(entityLabels, "state"), nil)
	bytesDesc = prometheus.NewDesc("raftbus_entity_size_bytes",
		"Bytes an entity holds in a partition this node leads, in every state (as against MaxSizeInMegabytes).",
		entityLabels, nil)

	groupLeaderDesc      = prometheus.NewDesc("raftbus_raft_leader", "1 when this node's replica leads the Raft group.", groupLabels, nil)
	groupTermDesc        = prometheus.NewDesc("raftbus_raft_term", "The Raft group's current term as this replica knows it.", groupLabels, nil)
	groupCommitDesc      = prometheus.NewDesc("raftbus_raft_commit_index", "The highest log index this replica knows committed.", groupLabels, nil)
	groupAppliedDesc     = prometheus.NewDesc("raftbus_raft_applied_index", "The log index this replica's state is current through.", groupLabels, nil)
	groupLastContactDesc = prometheus.NewDesc("raftbus_raft_last_contact_seconds", "Seconds since this follower last heard from its leader; 0 on the leader.", groupLabels, nil)
	groupSnapshotsDesc   = prometheus.NewDesc("raftbus_raft_snapshots_total", "Snapshots this replica took since it opened.", groupLabels, nil)

	readyDesc = prometheus.NewDesc("raftbus_node_ready", "1 when the node is ready to serve (as /readyz).", nil, nil)
)

// counterMetric is one of the engine's counters as a Prometheus counter.
type counterMetric struct {
	desc  *prometheus.Desc
	value func(partition.EntityStats) uint64
}

func newCounter(name, help string, value func(partition.EntityStats) uint64) counterMetric {
	return counterMetric{prometheus.NewDesc(name, help+" (partitions this node leads).", entityLabels, nil), value}
}

var messageCounters = []counterMetric{
	newCounter("raftbus_messages_sent_total", "Messages accepted by sends and schedules, duplicates not included",
		func(e partition.EntityStats) uint64 { return e.Counters.Sent }),
	newCounter("raftbus_messages_duplicates_total", "Messages dropped by duplicate detection",
		func(e partition.EntityStats) uint64 { return e.Counters.Duplicates }),
	newCounter("raftbus_messages_received_total", "Messages handed to receivers (locked or removed), dead-letter sub-queue included",
		func(e partition.EntityStats) uint64 { return e.Counters.Received }),
	newCounter("raftbus_messages_completed_total", "Messages completed",
		func(e partition.EntityStats) uint64 { return e.Counters.Completed }),
	newCounter("raftbus_messages_abandoned_total", "Messages abandoned",
		func(e partition.EntityStats) uint64 { return e.Counters.Abandoned }),
	newCounter("raftbus_messages_deferred_total", "Messages deferred",
		func(e partition.EntityStats) uint64 { return e.Counters.Deferred }),
	newCounter("raftbus_messages_dead_lettered_total", "Messages moved to the dead-letter sub-queue, for any reason",
		func(e partition.EntityStats) uint64 { return e.Counters.DeadLettered }),
	newCounter("raftbus_messages_expired_total", "Messages whose time to live ended",
		func(e partition.EntityStats) uint64 { return e.Counters.Expired }),
	newCounter("raftbus_messages_forwarded_total", "Messages put in transfer to a forwarding target",
		func(e partition.EntityStats) uint64 { return e.Counters.Forwarded }),
}

// stateCollector reads the node's state when scraped: the engine keeps the
// counts already, so nothing is updated per operation.
type stateCollector struct{ source Source }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{messagesDesc, bytesDesc, groupLeaderDesc, groupTermDesc, groupCommitDesc,
		groupAppliedDesc, groupLastContactDesc, groupSnapshotsDesc, readyDesc} {
		ch <- d
	}
	for _, m := range messageCounters {
		ch <- m.desc
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ready := 0.0
	if c.source.Ready() == nil {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	c.source.EachLed(func(id uint32, e partition.EntityStats) {
		p := strconv.FormatUint(uint64(id), 10)
		rt := e.Runtime
		for _, s := range []struct {
			state string
			n     int64
		}{
			{"active", rt.GetActiveMessageCount()},
			{"scheduled", rt.GetScheduledMessageCount()},
			{"deferred", rt.GetDeferredMessageCount()},
			{"dead_lettered", rt.GetDeadLetterMessageCount()},
			{"locked", rt.GetLockedMessageCount()},
			{"transfer", rt.GetTransferMessageCount()},
		} {
			ch <- prometheus.MustNewConstMetric(messagesDesc, prometheus.GaugeValue, float64(s.n), e.Path, p, s.state)
		}
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(rt.GetSizeInBytes()), e.Path, p)
		for _, m := range messageCounters {
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.value(e)), e.Path, p)
		}
	})
	now := time.Now()
	c.source.EachGroup(func(group string, s partition.RaftStats) {
		leader, contact := 0.0, 0.0
		if s.Leader {
			leader = 1
		} else if !s.LastContact.IsZero() {
			contact = now.Sub(s.LastContact).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(groupLeaderDesc, prometheus.GaugeValue, leader, group)
		ch <- prometheus.MustNewConstMetric(groupTermDesc, prometheus.GaugeValue, float64(s.Term), group)
		ch <- prometheus.MustNewConstMetric(groupCommitDesc, prometheus.GaugeValue, float64(s.CommitIndex), group)
		ch <- prometheus.MustNewConstMetric(groupAppliedDesc, prometheus.GaugeValue, float64(s.AppliedIndex), group)
		ch <- prometheus.MustNewConstMetric(groupLastContactDesc, prometheus.GaugeValue, contact, group)
		ch <- prometheus.MustNewConstMetric(groupSnapshotsDesc, prometheus.CounterValue, float64(s.Snapshots), group)
	})
}
