package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/test/procs"
)

func TestCommands(t *testing.T) {
	cl := procs.Start(t, raftbusd, 1)
	c := cli{t: t, server: cl.Nodes[0].Addr}

	t.Run("Help", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		for _, cmd := range []string{"queue", "topic", "subscription", "rule", "send", "receive", "peek", "schedule", "cancel", "status", "auth", "node"} {
			if out := c.ok(cmd, "--help"); !strings.Contains(out, "Examples:") {
				t.Fatalf("%s --help has no examples:\n%s", cmd, out)
			}
		}
		if r := c.run("", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
			t.Fatalf("unknown command: %+v", r)
		}
		c.fails(2, "want 1 argument", "queue", "create")
		c.fails(2, "--output is text or json", "queue", "list", "--output", "yaml")
	})

	t.Run("Queue", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		out := c.ok("queue", "create", "orders", "--partitions", "2", "--lock-duration", "30s")
		if !strings.Contains(out, "created queue orders") || !regexp.MustCompile(`defaultMessageTimeToLive:\s+unlimited\n`).MatchString(out) ||
			strings.Contains(out, "9223372036") {
			t.Fatalf("create: %s", out)
		}
		if out := c.ok("queue", "update", "orders", "--ttl", "90s"); !regexp.MustCompile(`defaultMessageTimeToLive:\s+90s\n`).MatchString(out) {
			t.Fatalf("update of the time to live: %s", out)
		}
		if !regexp.MustCompile(`autoDeleteOnIdle:\s+never\n`).MatchString(out) {
			t.Fatalf("create without auto-delete: %s", out)
		}
		if out := c.ok("queue", "update", "orders", "--auto-delete-on-idle", "10m"); !regexp.MustCompile(`autoDeleteOnIdle:\s+600s\n`).MatchString(out) {
			t.Fatalf("update of auto-delete on idle: %s", out)
		}
		c.fails(1, "INVALID_ARGUMENT", "queue", "update", "orders", "--auto-delete-on-idle", "1m")
		if out := c.ok("queue", "update", "orders", "--auto-delete-on-idle", "never"); !regexp.MustCompile(`autoDeleteOnIdle:\s+never\n`).MatchString(out) {
			t.Fatalf("auto-delete on idle turned off: %s", out)
		}
		var q map[string]any
		c.json(&q, "queue", "update", "orders", "--max-delivery-count", "3")
		if q["maxDeliveryCount"] != float64(3) || q["lockDuration"] != "30s" || q["partitionCount"] != float64(2) {
			t.Fatalf("update kept the other settings? %v", q)
		}
		var got struct {
			Queue   map[string]any `json:"queue"`
			Runtime map[string]any `json:"runtime"`
		}
		c.json(&got, "queue", "get", "orders")
		if got.Queue["name"] != "orders" || got.Runtime["entityPath"] != "orders" {
			t.Fatalf("get: %+v", got)
		}
		c.ok("queue", "create", "other")
		list := c.ok("queue", "list")
		if !strings.Contains(list, "NAME") || !strings.Contains(list, "orders") || !strings.Contains(list, "other") {
			t.Fatalf("list:\n%s", list)
		}
		var all []map[string]any
		c.json(&all, "queue", "list")
		if len(all) != 2 {
			t.Fatalf("json list: %v", all)
		}
		c.ok("queue", "delete", "other")
		c.fails(1, "NOT_FOUND", "queue", "get", "other")
		c.fails(1, "ALREADY_EXISTS", "queue", "create", "orders")
	})

	t.Run("SendReceive", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.ok("queue", "create", "work")
		c.ok("send", "work", "from an argument", "--property", "region=eu", "--property", "n:int=7", "--message-id", "a")
		body := filepath.Join(t.TempDir(), "body.txt")
		if err := os.WriteFile(body, []byte("from a file"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.ok("send", "work", "--file", body)
		if r := c.run("from stdin", "send", "work", "--server", c.server); r.code != 0 {
			t.Fatalf("send from stdin: %+v", r)
		}
		var peeked []map[string]any
		c.json(&peeked, "peek", "work", "--max", "10")
		if len(peeked) != 3 || peeked[0]["body"] != "from an argument" || peeked[1]["body"] != "from a file" || peeked[2]["body"] != "from stdin" {
			t.Fatalf("peek: %v", peeked)
		}
		props := peeked[0]["applicationProperties"].(map[string]any)
		if props["region"] != "eu" || props["n"] != float64(7) {
			t.Fatalf("properties: %v", props)
		}
		// Abandon one: it comes back with a higher delivery count.
		c.ok("receive", "work", "--settle", "abandon")
		var recv []map[string]any
		c.json(&recv, "receive", "work", "--max", "3")
		if len(recv) != 3 || recv[0]["deliveryCount"] != float64(2) || recv[0]["settled"] != "completed" {
			t.Fatalf("receive: %v", recv)
		}
		if r := c.run("", "receive", "work", "--wait", "100ms"); r.code != 0 || !strings.Contains(r.stderr, "no message arrived") {
			t.Fatalf("receive from an empty queue: %+v", r)
		}
	})

	t.Run("DeadLetter", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.ok("queue", "create", "dl")
		c.ok("send", "dl", "poison")
		if out := c.ok("receive", "dl", "--settle", "dead-letter", "--reason", "bad format"); !strings.Contains(out, "dead-lettered") {
			t.Fatalf("dead-letter: %s", out)
		}
		var dead []map[string]any
		c.json(&dead, "receive", "dl", "--dlq", "--mode", "receive-and-delete")
		if len(dead) != 1 || dead[0]["body"] != "poison" || dead[0]["deadLetterReason"] != "bad format" {
			t.Fatalf("dlq: %v", dead)
		}
	})

	t.Run("ScheduleCancel", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.ok("queue", "create", "later")
		var s struct {
			Seqs []int64 `json:"sequenceNumbers"`
		}
		c.json(&s, "schedule", "later", "reminder", "--in", "1h")
		if len(s.Seqs) != 1 {
			t.Fatalf("schedule: %+v", s)
		}
		var peeked []map[string]any
		c.json(&peeked, "peek", "later")
		if len(peeked) != 1 || peeked[0]["state"] != "scheduled" {
			t.Fatalf("peek scheduled: %v", peeked)
		}
		c.ok("cancel", "later", itoa(s.Seqs[0]))
		c.json(&peeked, "peek", "later")
		if len(peeked) != 0 {
			t.Fatalf("after cancel: %v", peeked)
		}
		at := time.Now().Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		c.ok("send", "later", "soon", "--schedule-at", at)
		var recv []map[string]any
		c.json(&recv, "receive", "later", "--wait", "10s")
		if len(recv) != 1 || recv[0]["body"] != "soon" {
			t.Fatalf("scheduled send: %v", recv)
		}
		c.fails(2, "give the time", "schedule", "later", "x")
		c.fails(2, "not a number", "cancel", "later", "x")
	})

	t.Run("Failures", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.fails(1, "NOT_FOUND", "send", "missing", "x")
		c.ok("queue", "create", "tiny", "--max-message-size-kb", "1")
		c.fails(1, "MESSAGE_SIZE_EXCEEDED", "send", "tiny", strings.Repeat("x", 4096))
		c.fails(1, "INVALID_ARGUMENT", "subscription", "create", "nowhere", "audit", "--sql", "region = 'eu' AND")
		c.fails(2, "give a filter", "rule", "create", "events", "audit", "high")
		c.ok("queue", "create", "carts", "--requires-session")
		c.fails(1, "INVALID_ARGUMENT", "send", "carts", "no session")
		dead := cli{t: t, server: "127.0.0.1:1"}
		dead.fails(1, "is raftbusd running?", "queue", "list", "--timeout", "2s")
	})

	t.Run("TopicsAndSessions", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.ok("topic", "create", "events")
		c.ok("subscription", "create", "events", "audit", "--sql", "region = 'eu'")
		c.ok("rule", "create", "events", "audit", "high", "--sql", "priority > 5")
		var rules []map[string]any
		c.json(&rules, "rule", "list", "events", "audit")
		if len(rules) != 2 {
			t.Fatalf("rules: %v", rules)
		}
		c.ok("send", "events", "for eu", "--property", "region=eu")
		c.ok("send", "events", "for us", "--property", "region=us")
		var recv []map[string]any
		c.json(&recv, "receive", "events/subscriptions/audit", "--wait", "10s", "--max", "10")
		if len(recv) != 1 || recv[0]["body"] != "for eu" {
			t.Fatalf("subscription received %v", recv)
		}
		c.ok("queue", "create", "orders-by-customer", "--requires-session")
		c.ok("send", "orders-by-customer", "first", "--session", "c1")
		c.ok("send", "orders-by-customer", "second", "--session", "c1")
		c.json(&recv, "receive", "orders-by-customer", "--session", "c1", "--wait", "10s", "--max", "10")
		if len(recv) != 2 || recv[0]["body"] != "first" || recv[1]["body"] != "second" {
			t.Fatalf("session receive: %v (both, in order)", recv)
		}
	})

	t.Run("Bench", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		for _, mode := range []string{"peek-lock", "receive-and-delete"} {
			var rep map[string]any
			c.json(&rep, "bench", "--count", "300", "--inflight", "16", "--producers", "2", "--consumers", "2", "--partitions", "2", "--mode", mode)
			if rep["sent"] != 300.0 || rep["received"] != 300.0 || rep["sendMsgsPerSecond"].(float64) <= 0 {
				t.Fatalf("bench %s: %v", mode, rep)
			}
			lat := rep["sendAckLatency"].(map[string]any)
			if lat["count"] != 300.0 || lat["p50Ms"].(float64) > lat["p99Ms"].(float64) {
				t.Fatalf("bench %s latency: %v", mode, lat)
			}
		}
		var sess map[string]any
		c.json(&sess, "bench", "--count", "100", "--inflight", "8", "--producers", "1", "--consumers", "2", "--sessions", "4")
		if sess["received"] != 100.0 {
			t.Fatalf("bench with sessions: %v", sess)
		}
		c.fails(2, "--mode", "bench", "--mode", "sideways")
		// --rate is a ceiling: 20 sends at 100 a second take at least
		// the 200 ms of 20 ticks.
		var paced map[string]any
		c.json(&paced, "bench", "--count", "20", "--rate", "100", "--inflight", "4", "--producers", "2", "--consumers", "1")
		if paced["received"] != 20.0 || paced["sendSeconds"].(float64) < 0.19 {
			t.Fatalf("bench at 100 a second: %v, want 20 sent in no less than 0.19 s", paced)
		}
		c.fails(2, "--rate", "bench", "--rate", "-1")
	})

	t.Run("SendCount", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.ok("queue", "create", "many", "--partitions", "2")
		r := c.run("", "send", "many", "x", "--count", "300")
		if r.code != 0 || !strings.Contains(r.stderr, "sent 300/300") || !strings.Contains(r.stdout, "sent 300 messages") {
			t.Fatalf("send --count: %+v", r)
		}
	})

	t.Run("Status", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		out := c.ok("status")
		for _, want := range []string{"NODE", "n1", "UP", "metadata leader", "CLOCK", "healthy", "ENTITY", "many", "LEADER", "SENT/S", "COMPLETED/S"} {
			if !strings.Contains(out, want) {
				t.Fatalf("status lacks %q:\n%s", want, out)
			}
		}
		var st struct {
			Cluster map[string]any            `json:"cluster"`
			Runtime map[string]map[string]any `json:"runtime"`
		}
		c.json(&st, "status")
		if st.Runtime["many"]["activeMessageCount"] != "300" {
			t.Fatalf("status json counts: %v", st.Runtime["many"])
		}
	})

	t.Run("Node", func(t *testing.T) {
		c := cli{t: t, server: c.server}
		c.ok("queue", "create", "placed", "--partitions", "2")
		out := c.ok("node", "list")
		if !regexp.MustCompile(`n1\s+\S+\s+UP\s+active\s+metadata leader\s+[1-9]\d*\s+[1-9]\d*\s+0\n`).MatchString(out) {
			t.Fatalf("node list:\n%s", out)
		}
		var got struct {
			Nodes []map[string]any `json:"nodes"`
		}
		c.json(&got, "node", "list")
		if len(got.Nodes) != 1 || got.Nodes[0]["membership"] != "NODE_MEMBERSHIP_UNSPECIFIED" || got.Nodes[0]["replicas"] == float64(0) {
			t.Fatalf("node list json: %v", got)
		}
		c.fails(1, "would leave 0 active nodes", "node", "drain", "n1")
		c.fails(1, "leads the metadata group", "node", "remove", "n1")
		c.fails(1, "not a member", "node", "remove", "n9")
		c.fails(2, "want 1 argument", "node", "drain")
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
