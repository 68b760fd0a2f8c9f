package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

// cli runs the command line in-process against server.
type cli struct {
	t      *testing.T
	server string
}

type result struct {
	code           int
	stdout, stderr string
}

func (c cli) run(stdin string, args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--server", c.server)
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// ok runs a command that must succeed and returns its stdout.
func (c cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != 0 {
		c.t.Fatalf("raftbus %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// json runs a command with --output json and decodes its output.
func (c cli) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("raftbus %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must fail with code and say want on stderr.
func (c cli) fails(code int, want string, args ...string) {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		c.t.Fatalf("raftbus %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
}
