package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

func TestTopicFilters(t *testing.T) {
	node := procs.Start(t, raftbusd, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got, err := run(ctx, node.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"audit":    {"o-1", "o-2", "o-3", "o-4", "o-5", "o-6"},
		"big-eu":   {"o-1", "o-5"}, // eu, and 100 is >= 100
		"americas": {"o-2", "o-4"},
		"express":  {"o-2", "o-3"}, // the correlation filter on Subject
	}
	for sub, ids := range want {
		// Each subscription receives in the order of the topic's sends.
		if !slices.Equal(got[sub], ids) {
			t.Errorf("%s got %v, want %v", sub, got[sub], ids)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got subscriptions %v, want %v", got, want)
	}
}
