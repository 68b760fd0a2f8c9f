package main

import (
	"strings"
	"testing"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/test/procs"
	"time"
)

// TestAuthCommands runs the CLI against a node with TLS and --auth: the
// root connection string makes a Send policy on one queue, whose
// connection string then sends there and is refused a receive.
func TestAuthCommands(t *testing.T) {
	cl := procs.StartWith(t, raftbusd, 1, procs.Options{TLS: true, Auth: true})
	await.Until(t, 30*time.Second, "the root key file", func() bool { return cl.RootConnectionString() != "" })
	ca := cl.CertFiles("test").CA
	root := cli{t: t, server: cl.Nodes[0].Addr}
	with := func(cs string, args ...string) []string {
		return append(args, "--tls-ca", ca, "--connection-string", cs)
	}
	if r := root.run("", "queue", "list", "--tls-ca", ca); r.code != 1 || !strings.Contains(r.stderr, "UNAUTHORIZED") {
		t.Fatalf("without a connection string: %+v", r)
	}
	root.ok(with(cl.RootConnectionString(), "queue", "create", "orders")...)
	var ps []map[string]any
	root.json(&ps, with(cl.RootConnectionString(), "auth", "create", "writer", "--rights", "send", "--entity", "orders")...)
	if len(ps) != 1 || ps[0]["name"] != "writer" || ps[0]["entityPath"] != "orders" || ps[0]["primaryKey"] == "" {
		t.Fatalf("create: %v", ps)
	}
	out := root.ok(with(cl.RootConnectionString(), "auth", "list", "--entity", "orders")...)
	i := strings.Index(out, "writer: Endpoint=")
	if i < 0 {
		t.Fatalf("list prints no connection string:\n%s", out)
	}
	writer := strings.TrimSpace(strings.SplitN(out[i+len("writer: "):], "\n", 2)[0])
	root.ok(with(writer, "send", "orders", "hello")...)
	if r := root.run("", with(writer, "receive", "orders", "--max", "1")...); r.code != 1 || !strings.Contains(r.stderr, "does not grant listen") {
		t.Fatalf("receive with a Send key: %+v", r)
	}
	root.ok(with(cl.RootConnectionString(), "auth", "delete", "writer", "--entity", "orders")...)
	if r := root.run("", with(cl.RootConnectionString(), "auth", "create", "x", "--rights", "read")...); r.code != 2 || !strings.Contains(r.stderr, "--rights") {
		t.Fatalf("bad rights: %+v", r)
	}
}
