package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const statusUsage = `Usage:
  raftbus status

Shows the cluster's nodes, and every partition with its leader, replicas
and message counts. A replica whose stored state failed a check shows as
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
	// Counts per partition, from each queue's runtime properties.
	counts := map[string]*raftbusv1.RuntimeProperties{}
	queues, err := ad.ListQueues(ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		rt, err := ad.GetQueueRuntimeProperties(ctx, q.GetName())
		if err != nil {
			return fmt.Errorf("counts of %s: %w", q.GetName(), err)
		}
		counts[q.GetName()] = rt
	}
	if a.output == "json" {
		rts := map[string]any{}
		for name, rt := range counts {
			rts[name] = rawProto(rt)
		}
		return a.printJSON(map[string]any{"cluster": rawProto(info), "runtime": rts})
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
		rows = append(rows, []string{n.GetNodeId(), n.GetAddress(), strings.TrimPrefix(n.GetState().String(), "NODE_STATE_"), role})
	}
	a.table([]string{"NODE", "ADDRESS", "STATE", "ROLE"}, rows)
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
	return nil
}

func partitionCounts(rt *admin.RuntimeProperties, id uint32) *raftbusv1.PartitionRuntimeProperties {
	for _, p := range rt.GetPartitions() {
		if p.GetPartitionId() == id {
			return p
		}
	}
	return nil
}
