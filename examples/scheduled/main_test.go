package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

func TestScheduled(t *testing.T) {
	node := procs.Start(t, raftbusd, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const in = 500 * time.Millisecond
	pending, got, err := run(ctx, node.Addrs(), in)
	if err != nil {
		t.Fatal(err)
	}
	// The cancelled reminder is gone at once; the others wait, scheduled.
	if len(pending) != 2 || string(pending[0].Body) != reminders[0] || string(pending[1].Body) != reminders[2] {
		t.Fatalf("peeked after the cancel: %v", bodies(pending))
	}
	for _, m := range pending {
		if m.State != client.MessageStateScheduled {
			t.Errorf("%q peeked in state %v, want scheduled", m.Body, m.State)
		}
	}
	if len(got) != 2 || string(got[0].Body) != reminders[0] || string(got[1].Body) != reminders[2] {
		t.Fatalf("received %d reminders, want %q and %q", len(got), reminders[0], reminders[2])
	}
	for i, m := range got {
		// Not before it was due, by the broker's clock (which stamps the
		// enqueue time, in milliseconds as AMQP does) and by ours (on the
		// same machine).
		due := pending[i].ScheduledEnqueueTime.Truncate(time.Millisecond)
		if m.EnqueuedTime.Before(due) || m.receivedAt.Before(due) {
			t.Errorf("%q due %v, enqueued %v, received %v: early", m.Body, due, m.EnqueuedTime, m.receivedAt)
		}
	}

	// Nothing is left: the cancelled reminder is not waiting somewhere.
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

func bodies(msgs []*client.ReceivedMessage) []string {
	var s []string
	for _, m := range msgs {
		s = append(s, string(m.Body))
	}
	return s
}
