package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

func TestDeadLetter(t *testing.T) {
	node := procs.Start(t, raftbusd, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := createQueue(ctx, node.Addrs()); err != nil {
		t.Fatal(err)
	}

	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=x;SharedAccessKey=y;UseDevelopmentEmulator=true", node.Nodes[0].AMQPAddr)
	rep, err := run(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.deadLetters) != 2 {
		t.Fatalf("%d dead letters, want 2", len(rep.deadLetters))
	}
	// In sequence order: the malformed payment, dead-lettered by the
	// consumer on its first delivery...
	bad, failed := rep.deadLetters[0], rep.deadLetters[1]
	if bad.MessageID != "payment-2" || deref(bad.DeadLetterReason) != "MalformedPayment" ||
		!strings.Contains(deref(bad.DeadLetterErrorDescription), "JSON") || bad.DeliveryCount != 1 {
		t.Errorf("malformed payment dead-lettered as %s: %q %q after %d deliveries",
			bad.MessageID, deref(bad.DeadLetterReason), deref(bad.DeadLetterErrorDescription), bad.DeliveryCount)
	}
	// ...then the one that failed, dead-lettered by the broker at its last
	// allowed delivery.
	if failed.MessageID != "payment-3" || deref(failed.DeadLetterReason) != "MaxDeliveryCountExceeded" ||
		deref(failed.DeadLetterErrorDescription) == "" || failed.DeliveryCount != maxDeliveryCount {
		t.Errorf("failing payment dead-lettered as %s: %q %q after %d deliveries",
			failed.MessageID, deref(failed.DeadLetterReason), deref(failed.DeadLetterErrorDescription), failed.DeliveryCount)
	}
	if !slices.Equal(rep.resubmitted, []string{"payment-3"}) {
		t.Errorf("resubmitted %v, want [payment-3]", rep.resubmitted)
	}
	if !slices.Equal(rep.paid, []string{"alice", "carol"}) {
		t.Errorf("paid %v, want alice, then carol once resubmitted", rep.paid)
	}

	// The main queue is empty; the malformed payment waits, unlocked, in
	// the dead-letter queue.
	adm, err := admin.New(node.Addrs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	rt, err := adm.GetQueueRuntimeProperties(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if rt.ActiveMessageCount != 0 || rt.LockedMessageCount != 0 || rt.DeadLetterMessageCount != 1 || rt.TotalMessageCount != 1 {
		t.Errorf("after the run: %v, want one dead letter and nothing else", rt)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
