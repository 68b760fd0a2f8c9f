package azsdk

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// TestEntityNamesIgnoreCase: as in Service Bus, an application may spell
// an entity's name in any case; the broker takes the entity whose name
// differs only in case. A name two entities share but for case names
// neither.
func TestEntityNamesIgnoreCase(t *testing.T) {
	b := startBroker(t)
	ctx := testContext(t)
	b.queue(t, "CaseQueue")
	if _, err := b.admin.CreateTopic(ctx, "Shop", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.CreateSubscription(ctx, "Shop", "Audit", nil, nil); err != nil {
		t.Fatal(err)
	}

	send(t, ctx, b.sender(t, "casequeue"), "lower")
	if m := receiveOne(t, ctx, b.receiver(t, "CASEQUEUE", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})); string(m.Body) != "lower" {
		t.Fatalf("received %q from CASEQUEUE, want what was sent to casequeue", m.Body)
	}
	send(t, ctx, b.sender(t, "SHOP"), "order")
	r, err := b.sb.NewReceiverForSubscription("shop", "AUDIT", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if m := receiveOne(t, ctx, r); string(m.Body) != "order" {
		t.Fatalf("received %q from shop/AUDIT", m.Body)
	}

	// Two queues alike but for case: each by its own name, neither by
	// a third spelling.
	b.queue(t, "twin")
	b.queue(t, "Twin")
	send(t, ctx, b.sender(t, "Twin"), "upper twin")
	rt, err := b.admin.GetQueueRuntimeProperties(ctx, "Twin")
	if err != nil || rt.GetActiveMessageCount() != 1 {
		t.Fatalf("Twin holds %d messages (%v), want 1", rt.GetActiveMessageCount(), err)
	}
	s, err := b.sb.NewSender("TWIN", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("which?")}, nil)
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotFound {
		t.Fatalf("send to TWIN with twin and Twin: %v, want not found", err)
	}
}
