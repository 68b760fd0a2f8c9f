package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const authUsage = `Usage:
  raftbus auth create <policy> --rights send,listen [--entity queue-or-topic]
  raftbus auth list [--entity queue-or-topic]
  raftbus auth regenerate <policy> --key primary|secondary [--entity ...]
  raftbus auth delete <policy> [--entity ...]

Shared access policies, as in Service Bus: a key name, two keys and rights
(manage, send, listen; manage comes with the other two), on the namespace
(every entity) or on one queue or topic (and its subscriptions). A client
signs tokens with a key; with --connection-string (or
RAFTBUS_CONNECTION_STRING) the CLI does. create, list and regenerate print
the keys and a connection string for each. Needs a key with Manage at the
policy's scope, such as the root key every node of a cluster started with
--auth writes to <data-dir>/root-access-key.

Examples:
  raftbus auth create orders-writer --rights send --entity orders
  raftbus auth regenerate orders-writer --key primary --entity orders
  raftbus auth list --output json
`

func runAuth(ctx context.Context, a *app, args []string) error {
	v, args, err := verb(args)
	if err != nil {
		return err
	}
	fs := a.flags("auth " + v)
	entity := fs.String("entity", "", "")
	rights := fs.String("rights", "", "")
	key := fs.String("key", "", "")
	var names []string
	switch v {
	case "create", "regenerate", "delete":
		names = []string{"policy"}
	case "list":
	default:
		return usagef("unknown action %q", v)
	}
	pos, err := a.parse(fs, args, names...)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	api := raftbusv1.NewAccessServiceClient(c.AdminConn())
	switch v {
	case "create":
		rs, err := parseRights(*rights)
		if err != nil {
			return err
		}
		resp, err := api.CreateAccessPolicy(ctx, &raftbusv1.CreateAccessPolicyRequest{Policy: &raftbusv1.AccessPolicy{Name: pos[0], EntityPath: *entity, Rights: rs}})
		if err != nil {
			return err
		}
		return a.showPolicies([]*raftbusv1.AccessPolicy{resp.GetPolicy()})
	case "regenerate":
		which, ok := map[string]raftbusv1.AccessKey{"primary": raftbusv1.AccessKey_ACCESS_KEY_PRIMARY, "secondary": raftbusv1.AccessKey_ACCESS_KEY_SECONDARY}[*key]
		if !ok {
			return usagef("--key is primary or secondary, not %q", *key)
		}
		resp, err := api.RegenerateAccessPolicyKey(ctx, &raftbusv1.RegenerateAccessPolicyKeyRequest{Name: pos[0], EntityPath: *entity, Key: which})
		if err != nil {
			return err
		}
		return a.showPolicies([]*raftbusv1.AccessPolicy{resp.GetPolicy()})
	case "delete":
		if _, err := api.DeleteAccessPolicy(ctx, &raftbusv1.DeleteAccessPolicyRequest{Name: pos[0], EntityPath: *entity}); err != nil {
			return err
		}
		return a.done("deleted policy "+pos[0], map[string]string{"deleted": pos[0]})
	}
	resp, err := api.ListAccessPolicies(ctx, &raftbusv1.ListAccessPoliciesRequest{EntityPath: *entity})
	if err != nil {
		return err
	}
	return a.showPolicies(resp.GetPolicies())
}

func parseRights(s string) ([]raftbusv1.AccessRight, error) {
	var out []raftbusv1.AccessRight
	for _, r := range strings.Split(s, ",") {
		v, ok := raftbusv1.AccessRight_value["ACCESS_RIGHT_"+strings.ToUpper(strings.TrimSpace(r))]
		if !ok || v == 0 {
			return nil, usagef("--rights is a comma-separated list of manage, send and listen, not %q", s)
		}
		out = append(out, raftbusv1.AccessRight(v))
	}
	return out, nil
}

// showPolicies prints policies with their keys and a connection string
// for the primary key, for the servers the CLI was given.
func (a *app) showPolicies(ps []*raftbusv1.AccessPolicy) error {
	if a.output == "json" {
		return printProtoList(a, ps)
	}
	var rows [][]string
	for _, p := range ps {
		var rights []string
		for _, r := range p.GetRights() {
			rights = append(rights, strings.ToLower(strings.TrimPrefix(r.String(), "ACCESS_RIGHT_")))
		}
		scope := p.GetEntityPath()
		if scope == "" {
			scope = "(namespace)"
		}
		rows = append(rows, []string{p.GetName(), scope, strings.Join(rights, ","), p.GetPrimaryKey(), p.GetSecondaryKey()})
	}
	a.table([]string{"POLICY", "SCOPE", "RIGHTS", "PRIMARY KEY", "SECONDARY KEY"}, rows)
	endpoint := "sb://" + a.server + "/"
	if cs, err := sas.ParseConnectionString(a.connectionString); err == nil {
		endpoint = cs.Endpoint
	}
	for _, p := range ps {
		cs := sas.String(endpoint, p.GetName(), p.GetPrimaryKey())
		if p.GetEntityPath() != "" {
			cs += ";EntityPath=" + p.GetEntityPath()
		}
		fmt.Fprintf(a.stdout, "%s: %s\n", p.GetName(), cs)
	}
	return nil
}
