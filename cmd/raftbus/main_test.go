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
	var any any
	_ = json.Unmarshal([]byte(out), &any)
	if name, ok := notCamelCase(any); !ok {
		c.t.Fatalf("raftbus %s: JSON names are camelCase in every command, not %q:\n%s", strings.Join(args, " "), name, out)
	}
}

// userKeyed are the JSON fields whose names are data (application
// properties, entity paths, error reasons), not names the CLI chose.
var userKeyed = map[string]bool{
	"applicationProperties": true, "runtime": true, "runtimeUnavailable": true,
	"sendErrorReasons": true, "sendErrorSamples": true, "receiveErrorReasons": true, "receiveErrorSamples": true,
}

// notCamelCase finds a field name in v that is not lowerCamelCase.
func notCamelCase(v any) (string, bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "" || strings.ContainsAny(k, "_- ") || strings.ToLower(k[:1]) != k[:1] {
				return k, false
			}
			if userKeyed[k] {
				continue
			}
			if name, ok := notCamelCase(e); !ok {
				return name, false
			}
		}
	case []any:
		for _, e := range x {
			if name, ok := notCamelCase(e); !ok {
				return name, false
			}
		}
	}
	return "", true
}

// fails runs a command that must fail with code and say want on stderr.
func (c cli) fails(code int, want string, args ...string) {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		c.t.Fatalf("raftbus %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
}
