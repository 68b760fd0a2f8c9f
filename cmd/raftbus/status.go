package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const statusUsage = `Usage:
  raftbus status

Shows the cluster's nodes, and every partition with its leader, replicas
and message counts. CLOCK is each node's judgement of its own clock
(healthy, unconfirmed or SKEWED) and its offset from the clock of the node
that answers; a skewed node refuses to lead.
A replica whose stored state failed a check shows as
damaged (it does not vote, lead or serve), then as rebuilding while it
catches up from the leader as a non-voter; what was found is listed
below the table.

Examples:
  raftbus status --server 127.0.0.1:7401
  raftbus status --output json
`

func runStatus(ctx context.Context, a *app, args []string) error {
	fs := a.flags("status")
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
		return a.printJSON(map[string]any{"cluster": rawProto(info), "runtime": rts, "runtimeUnavailable": unavailable})
	}
	fmt.Fprintf(a.stdout, "cluster %s\n\n", info.GetClusterId())
	var rows [][]string
	for _, n := range info.GetNodes() {
		role := ""
		if n.GetMetadataLeader() {
			role = "metadata leader"
		} else if n.GetMetadataVoter() {
			role = "metadata voter"
		}
		rows = append(rows, []string{n.GetNodeId(), n.GetAddress(), strings.TrimPrefix(n.GetState().String(), "NODE_STATE_"), role, clockCell(n)})
	}
	a.table([]string{"NODE", "ADDRESS", "STATE", "ROLE", "CLOCK"}, rows)
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
