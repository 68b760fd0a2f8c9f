package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

func TestSessions(t *testing.T) {
	node := procs.Start(t, raftbusd, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const sessions, consumers = 6, 3
	carts, err := run(ctx, node.Addrs(), sessions, consumers)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range carts {
		if seen[c.id] {
			t.Errorf("%s processed twice", c.id)
		}
		seen[c.id] = true
		// Each session whole, by one consumer, in the order sent, though
		// the sends interleaved all sessions.
		if !slices.Equal(c.steps, steps) {
			t.Errorf("%s processed %q, want %q", c.id, c.steps, steps)
		}
	}
	for s := range sessions {
		if id := fmt.Sprintf("cart-%d", s); !seen[id] {
			t.Errorf("%s not processed", id)
		}
	}
}
