package main

import (
	"context"
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

	rep, err := run(ctx, node.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.deadLetters) != 2 {
		t.Fatalf("%d dead letters, want 2", len(rep.deadLetters))
	}
	// In sequence order: the malformed payment, dead-lettered by the
	// consumer on its first delivery...
	bad, failed := rep.deadLetters[0], rep.deadLetters[1]
	if bad.MessageID != "payment-2" || bad.DeadLetterReason != "MalformedPayment" ||
		!strings.Contains(bad.DeadLetterErrorDescription, "JSON") || bad.DeliveryCount != 1 {
		t.Errorf("malformed payment dead-lettered as %s: %q %q after %d deliveries",
			bad.MessageID, bad.DeadLetterReason, bad.DeadLetterErrorDescription, bad.DeliveryCount)
	}
	// ...then the one that failed, dead-lettered by the broker at its last
	// allowed delivery.
	if failed.MessageID != "payment-3" || failed.DeadLetterReason != "MaxDeliveryCountExceeded" ||
		failed.DeadLetterErrorDescription == "" || failed.DeliveryCount != maxDeliveryCount {
		t.Errorf("failing payment dead-lettered as %s: %q %q after %d deliveries",
			failed.MessageID, failed.DeadLetterReason, failed.DeadLetterErrorDescription, failed.DeliveryCount)
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
