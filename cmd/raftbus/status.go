package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const statusUsage = `Usage:
  raftbus status

Shows the cluster's nodes, and every partition with its leader, replicas
and message counts. Each node's message rates (SENT/S, RECEIVED/S,
COMPLETED/S, DEAD-LETTERED/S: what the partitions it leads did, as its
metrics count it) come from two readings --interval apart (0: counts
only); a node whose leaderships changed in between shows "-". CLOCK is each node's judgement of its own clock
(healthy, unconfirmed or SKEWED) and its offset from the clock of the node
that answers; a skewed node refuses to lead.
A replica whose stored state failed a check shows as
damaged (it does not vote, lead or serve), then as rebuilding while it
catches up from the leader as a non-voter; what was found is listed
below the table.

Examples:
  raftbus status --server 127.0.0.1:7401
  raftbus status --output json
  raftbus status --interval 5s
`

func runStatus(ctx context.Context, a *app, args []string) error {
	fs := a.flags("status")
	interval := fs.Duration("interval", time.Second, "")
	if _, err := a.parse(fs, args); err != nil {
		return err
	}
	ad, err := a.admin()
	if err != nil {
		return err
	}
	defer ad.Close()
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	info, err := ad.GetClusterInfo(ctx)
	if err != nil {
		return err
	}
	var rates map[string]*messageRates
	if *interval > 0 {
		first, start := info, time.Now()
		select {
		case <-time.After(*interval):
		case <-ctx.Done():
			return ctx.Err()
		}
		if info, err = ad.GetClusterInfo(ctx); err != nil {
			return err
		}
		rates = ratesBetween(first, info, time.Since(start))
	}
	// Counts per partition, from each queue's runtime properties. A queue
	// that cannot answer (a partition without a leader) is named, and hides
	// nothing else.
	counts := map[string]*raftbusv1.RuntimeProperties{}
	unavailable := map[string]string{}
	queues, err := ad.ListQueues(ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		qctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
		rt, err := ad.GetQueueRuntimeProperties(qctx, q.GetName())
		cancel()
		if err != nil {
			unavailable[q.GetName()] = err.Error()
			continue
		}
		counts[q.GetName()] = rt
	}
	if a.output == "json" {
		rts := map[string]any{}
		for name, rt := range counts {
			rts[name] = rawProto(rt)
		}
		return a.printJSON(map[string]any{"cluster": rawProto(info), "runtime": rts, "runtimeUnavailable": unavailable, "rates": rates})
	}
	fmt.Fprintf(a.stdout, "cluster %s\n\n", info.GetClusterId())
	var rows [][]string
	for _, n := range info.GetNodes() {
		row := []string{n.GetNodeId(), n.GetAddress(), strings.TrimPrefix(n.GetState().String(), "NODE_STATE_"), metadataRole(n), clockCell(n)}
		if rates != nil {
			row = append(row, rates[n.GetNodeId()].cells()...)
		}
		rows = append(rows, row)
	}
	header := []string{"NODE", "ADDRESS", "STATE", "ROLE", "CLOCK"}
	if rates != nil {
		header = append(header, "SENT/S", "RECEIVED/S", "COMPLETED/S", "DEAD-LETTERED/S")
	}
	a.table(header, rows)
	for _, n := range info.GetNodes() {
		switch n.GetClockState() {
		case raftbusv1.ClockState_CLOCK_STATE_SKEWED:
			fmt.Fprintf(a.stdout, "\nWARNING: node %s's clock is SKEWED: it is further than %v from a majority of the cluster's clocks; it hands over every group it leads and refuses to lead until its time is fixed\n",
				n.GetNodeId(), info.GetMaxClockOffset().AsDuration())
		case raftbusv1.ClockState_CLOCK_STATE_UNCONFIRMED:
			fmt.Fprintf(a.stdout, "\nWARNING: node %s's clock is unconfirmed: too few clocks agree to vouch for it, so it leads nothing\n", n.GetNodeId())
		}
	}
	fmt.Fprintln(a.stdout)
	rows = nil
	var damage []string
	for _, p := range info.GetPartitions() {
		var replicas []string
		for _, r := range p.GetReplicas() {
			state := strings.ToLower(strings.TrimPrefix(r.GetRole().String(), "REPLICA_ROLE_"))
			switch r.GetHealth() {
			case raftbusv1.ReplicaHealth_REPLICA_HEALTH_DAMAGED:
				state = "damaged"
			case raftbusv1.ReplicaHealth_REPLICA_HEALTH_REBUILDING:
				state += ",rebuilding"
			}
			replicas = append(replicas, r.GetNodeId()+":"+state)
			if r.GetDamage() != "" {
				damage = append(damage, fmt.Sprintf("%s partition %d on %s: %s", p.GetEntityPath(), p.GetPartitionId(), r.GetNodeId(), r.GetDamage()))
			}
		}
		active, dead, scheduled := "-", "-", "-"
		if pc := partitionCounts(counts[p.GetEntityPath()], p.GetPartitionId()); pc != nil {
			active, dead, scheduled = fmt.Sprint(pc.GetActiveMessageCount()), fmt.Sprint(pc.GetDeadLetterMessageCount()), fmt.Sprint(pc.GetScheduledMessageCount())
		}
		leader := p.GetLeaderNodeId()
		if leader == "" {
			leader = "(none)"
		}
		rows = append(rows, []string{p.GetEntityPath(), fmt.Sprint(p.GetPartitionId()), leader, fmt.Sprint(p.GetTerm()),
			fmt.Sprint(p.GetAppliedIndex()), strings.Join(replicas, " "), active, dead, scheduled})
	}
	a.table([]string{"ENTITY", "PARTITION", "LEADER", "TERM", "APPLIED", "REPLICAS", "ACTIVE", "DEAD-LETTERED", "SCHEDULED"}, rows)
	if len(damage) > 0 {
		fmt.Fprintln(a.stdout, "\ndamaged replicas:")
		for _, d := range damage {
			fmt.Fprintln(a.stdout, "  "+d)
		}
	}
	if len(unavailable) > 0 {
		fmt.Fprintln(a.stdout, "\ncounts unavailable:")
		for _, name := range slices.Sorted(maps.Keys(unavailable)) {
			fmt.Fprintf(a.stdout, "  %s: %s\n", name, unavailable[name])
		}
	}
	return nil
}

// runtimeTimeout bounds the wait for one queue's counts, so that a queue
// that cannot answer does not use up the whole command's time.
const runtimeTimeout = 3 * time.Second

// clockCell is a node's clock as the answering node sees it: the node's
// own judgement, and its offset from the answering node's clock.
// metadataRole is a node's part in the metadata group.
func metadataRole(n *raftbusv1.NodeInfo) string {
	switch {
	case n.GetMetadataLeader():
		return "metadata leader"
	case n.GetMetadataVoter():
		return "metadata voter"
	}
	return ""
}

func clockCell(n *raftbusv1.NodeInfo) string {
	state := strings.ToLower(strings.TrimPrefix(n.GetClockState().String(), "CLOCK_STATE_"))
	switch n.GetClockState() {
	case raftbusv1.ClockState_CLOCK_STATE_UNSPECIFIED:
		state = "-"
	case raftbusv1.ClockState_CLOCK_STATE_SKEWED:
		state = "SKEWED"
	}
	if off := n.GetClockOffset(); off != nil {
		d := off.AsDuration().Round(time.Millisecond)
		sign := "+"
		if d < 0 {
			sign, d = "-", -d
		}
		state += fmt.Sprintf(" (%s%v)", sign, d)
	}
	return state
}

func partitionCounts(rt *admin.RuntimeProperties, id uint32) *raftbusv1.PartitionRuntimeProperties {
	for _, p := range rt.GetPartitions() {
		if p.GetPartitionId() == id {
			return p
		}
	}
	return nil
}

// messageRates are a node's message counters per second between two
// readings.
type messageRates struct {
	SentPerSecond         float64 `json:"sentPerSecond"`
	ReceivedPerSecond     float64 `json:"receivedPerSecond"`
	CompletedPerSecond    float64 `json:"completedPerSecond"`
	DeadLetteredPerSecond float64 `json:"deadLetteredPerSecond"`
}

// ratesBetween gives the rates of the nodes that answered both readings
// and whose counters did not go back (a leadership moved away) or change
// their partitions in between.
func ratesBetween(first, second *raftbusv1.GetClusterInfoResponse, elapsed time.Duration) map[string]*messageRates {
	before := map[string]*raftbusv1.NodeMessageStats{}
	for _, n := range first.GetNodes() {
		if m := n.GetMessages(); m != nil {
			before[n.GetNodeId()] = m
		}
	}
	out := map[string]*messageRates{}
	secs := elapsed.Seconds()
	for _, n := range second.GetNodes() {
		a, b := before[n.GetNodeId()], n.GetMessages()
		if a == nil || b == nil || a.GetPartitionsLed() != b.GetPartitionsLed() ||
			b.GetSent() < a.GetSent() || b.GetReceived() < a.GetReceived() ||
			b.GetCompleted() < a.GetCompleted() || b.GetDeadLettered() < a.GetDeadLettered() {
			continue
		}
		out[n.GetNodeId()] = &messageRates{
			SentPerSecond:         float64(b.GetSent()-a.GetSent()) / secs,
			ReceivedPerSecond:     float64(b.GetReceived()-a.GetReceived()) / secs,
			CompletedPerSecond:    float64(b.GetCompleted()-a.GetCompleted()) / secs,
			DeadLetteredPerSecond: float64(b.GetDeadLettered()-a.GetDeadLettered()) / secs,
		}
	}
	return out
}

// cells are the rates as table cells; "-" for a node without them.
func (r *messageRates) cells() []string {
	if r == nil {
		return []string{"-", "-", "-", "-"}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	return []string{f(r.SentPerSecond), f(r.ReceivedPerSecond), f(r.CompletedPerSecond), f(r.DeadLetteredPerSecond)}
}
