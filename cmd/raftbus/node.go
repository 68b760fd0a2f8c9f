package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const nodeUsage = `Usage:
  raftbus node list
  raftbus node drain <node-id>
  raftbus node undrain <node-id>
  raftbus node remove <node-id>

list shows each node: whether it is up, its membership (active, draining,
removed), its role in the metadata group, how many partition replicas it
holds, how many of them it should lead, and how many are moving.

drain moves every replica off a node onto the others, leadership first,
one replica at a time per partition with three replicas kept throughout;
the node stays a member with nothing placed on it (stop it, then remove
it, or undrain it). Refused when the others could not hold three replicas.

remove takes a node that is gone for good out of the cluster: its replicas
are re-created on the others from their healthy copies, then it leaves the
metadata group, and its id is never let in again (a replacement machine
joins under a new --node-id). Refused while the node is up with replicas
(drain it first) and when a partition could not reach a quorum without it.

drain and remove return once the change is recorded; the moves follow in
the background: watch them with raftbus node list.

Examples:
  raftbus node list
  raftbus node drain n3
  raftbus node remove n3 --output json
`

func runNode(ctx context.Context, a *app, args []string) error {
	v, args, err := verb(args)
	if err != nil {
		return err
	}
	var names []string
	switch v {
	case "list":
	case "drain", "undrain", "remove":
		names = []string{"node-id"}
	default:
		return usagef("unknown action %q", v)
	}
	fs := a.flags("node " + v)
	pos, err := a.parse(fs, args, names...)
	if err != nil {
		return err
	}
	ad, err := a.admin()
	if err != nil {
		return err
	}
	defer ad.Close()
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	switch v {
	case "drain":
		err = ad.DrainNode(ctx, pos[0])
	case "undrain":
		err = ad.UndrainNode(ctx, pos[0])
	case "remove":
		err = ad.RemoveNode(ctx, pos[0])
	}
	if err != nil {
		return err
	}
	info, err := ad.GetClusterInfo(ctx)
	if err != nil {
		return err
	}
	if a.output == "json" {
		var nodes []any
		for _, n := range info.GetNodes() {
			nodes = append(nodes, rawProto(n))
		}
		return a.printJSON(map[string]any{"nodes": nodes})
	}
	var rows [][]string
	for _, n := range info.GetNodes() {
		membership := "active"
		if m := n.GetMembership(); m != raftbusv1.NodeMembership_NODE_MEMBERSHIP_UNSPECIFIED {
			membership = strings.ToLower(strings.TrimPrefix(m.String(), "NODE_MEMBERSHIP_"))
		}
		rows = append(rows, []string{n.GetNodeId(), n.GetAddress(), strings.TrimPrefix(n.GetState().String(), "NODE_STATE_"), membership, metadataRole(n),
			strconv.Itoa(int(n.GetReplicas())), strconv.Itoa(int(n.GetPreferredLeaderships())), strconv.Itoa(int(n.GetReplicasMoving()))})
	}
	a.table([]string{"NODE", "ADDRESS", "STATE", "MEMBERSHIP", "ROLE", "REPLICAS", "LEADS", "MOVING"}, rows)
	if v != "list" {
		fmt.Fprintf(a.stdout, "\nnode %s: %s requested; replicas move in the background (raftbus node list shows them)\n", pos[0], v)
	}
	return nil
}
