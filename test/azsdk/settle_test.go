package azsdk

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/internal/await"
)

// TestSettlementsRightBeforeADetachAreApplied, at the AMQP level: a
// receiver in receiver-settle-mode first takes six messages in peek-lock,
// accepts each (a settled disposition: the broker does not answer) and
// detaches at once, as the Python SDK does when it leaves its receiver's
// with block. Every accept must complete its message; none may wait for
// its lock to expire and come back.
func TestSettlementsRightBeforeADetachAreApplied(t *testing.T) {
	b := startBroker(t)
	ctx := testContext(t)
	q := b.queue(t, "settle-then-detach")
	s := b.sender(t, q)
	for range 6 {
		send(t, ctx, s, "settle me")
	}
	conn, err := amqp.Dial(ctx, "amqp://"+b.cluster.Nodes[0].AMQPAddr, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := session.NewReceiver(ctx, q, &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeFirst.Ptr(), Credit: 6})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*amqp.Message
	for len(msgs) < 6 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatalf("accept: %v", err)
		}
	}
	if err := rcv.Close(ctx); err != nil {
		t.Fatalf("detach: %v", err)
	}
	// The settlements are applied after the dispositions arrive; the lock
	// lasts a minute, so a lost one stays locked well past this wait.
	var active, locked int64
	await.Until(t, 20*time.Second, "the six messages completed", func() bool {
		rp, err := b.admin.GetQueueRuntimeProperties(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		active, locked = rp.GetActiveMessageCount(), rp.GetLockedMessageCount()
		return active == 0
	})
	if locked != 0 {
		t.Fatalf("%d messages still locked", locked)
	}
}
