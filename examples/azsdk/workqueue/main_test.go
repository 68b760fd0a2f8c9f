package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

func TestWorkQueue(t *testing.T) {
	node := procs.Start(t, raftbusd, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := createQueue(ctx, node.Addrs()); err != nil {
		t.Fatal(err)
	}

	const jobs, workers = 200, 4
	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=x;SharedAccessKey=y;UseDevelopmentEmulator=true", node.Nodes[0].AMQPAddr)
	done, err := run(ctx, cs, jobs, workers)
	if err != nil {
		t.Fatal(err)
	}
	times := map[string]int{}
	busy := 0
	for _, ids := range done {
		if len(ids) > 0 {
			busy++
		}
		for _, id := range ids {
			times[id]++
		}
	}
	if len(times) != jobs {
		t.Errorf("%d distinct jobs done, want %d", len(times), jobs)
	}
	for id, n := range times {
		if n != 1 {
			t.Errorf("%s done %d times", id, n)
		}
	}
	if busy < 2 {
		t.Errorf("%d of %d workers did any job: the consumers did not compete", busy, workers)
	}

	// Done means completed: nothing is left on the broker, not even
	// locked (nor held for a receiver link that has closed).
	adm, err := admin.New(node.Addrs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	rt, err := adm.GetQueueRuntimeProperties(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if rt.TotalMessageCount != 0 {
		t.Errorf("queue holds %d messages after the run (%v)", rt.TotalMessageCount, rt)
	}
}
