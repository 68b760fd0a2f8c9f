// Command deadletter is the dead-letter flow of ../../deadletter written
// with the Azure SDK for Go (azservicebus) over AMQP 1.0: a malformed
// payment is dead-lettered at once with a reason, one that fails on
// every try is abandoned until the queue's MaxDeliveryCount moves it to
// the dead-letter queue; the dead-letter queue is inspected, and the
// failed payment resubmitted once its cause is gone.
//
//	go run ./deadletter [-server 127.0.0.1:7400] [-connection-string ...]
//
// (from examples/azsdk).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const (
	queue            = "example-az-payments"
	maxDeliveryCount = 3
)

var payments = []string{
	`{"to":"alice","amount":10}`,
	`{"to":"bob","amount":`, // cut short: never valid
	`{"to":"carol","amount":30}`,
}

type payment struct {
	To     string `json:"to"`
	Amount int    `json:"amount"`
}

// errGatewayDown is the transient failure: carol's payments fail until
// the gateway is back.
var errGatewayDown = errors.New("payment gateway unavailable")

// report is what a run saw, for the output and the test.
type report struct {
	paid        []string // in the order paid
	deadLetters []*azservicebus.ReceivedMessage
	resubmitted []string
}

func main() {
	server := flag.String("server", env("RAFTBUS_ADDR", client.DefaultAddress), "raftbusd nodes for creating the queue (env RAFTBUS_ADDR)")
	cs := flag.String("connection-string", env("SERVICEBUS_CONNECTION_STRING", localConnectionString), "for the SDK (env SERVICEBUS_CONNECTION_STRING)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if err := createQueue(ctx, strings.Split(*server, ",")); err != nil {
		log.Fatal(err)
	}
	r, err := run(ctx, *cs)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range r.deadLetters {
		fmt.Printf("dead letter #%d %s, delivery count %d: %s: %s\n",
			*m.SequenceNumber, m.Body, m.DeliveryCount, *m.DeadLetterReason, *m.DeadLetterErrorDescription)
	}
	fmt.Println("resubmitted:", strings.Join(r.resubmitted, ", "))
	fmt.Println("paid:", strings.Join(r.paid, ", "))
}

// localConnectionString reaches the AMQP listener of a node on
// 127.0.0.1:7400 without TLS; the key is not checked there.
const localConnectionString = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=x;SharedAccessKey=y;UseDevelopmentEmulator=true"

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// createQueue makes a fresh queue for the example with raftbus's own
// admin API (or `raftbus queue create`): the SDK's administration client
// speaks HTTPS only (docs/management-api.md), and the example's node
// runs without TLS.
func createQueue(ctx context.Context, server []string) error {
	adm, err := admin.New(server, nil)
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := adm.DeleteQueue(ctx, queue); err != nil && !errors.Is(err, client.ErrNotFound) {
		return err
	}
	_, err = adm.CreateQueue(ctx, queue, &admin.QueueProperties{MaxDeliveryCount: to.Ptr(int32(maxDeliveryCount))})
	return err
}

func run(ctx context.Context, connectionString string) (*report, error) {
	sb, err := azservicebus.NewClientFromConnectionString(connectionString, nil)
	if err != nil {
		return nil, err
	}
	defer sb.Close(context.Background())
	sender, err := sb.NewSender(queue, nil)
	if err != nil {
		return nil, err
	}
	defer sender.Close(context.Background())
	for i, body := range payments {
		m := &azservicebus.Message{MessageID: to.Ptr(fmt.Sprintf("payment-%d", i+1)), Body: []byte(body)}
		if err := sender.SendMessage(ctx, m, nil); err != nil {
			return nil, err
		}
	}
	receiver, err := sb.NewReceiverForQueue(queue, nil)
	if err != nil {
		return nil, err
	}
	defer receiver.Close(context.Background())

	rep := &report{}
	pay := func(p payment) error {
		if p.To == "carol" {
			return errGatewayDown
		}
		rep.paid = append(rep.paid, p.To)
		return nil
	}
	if err := consume(ctx, receiver, len(payments), pay); err != nil {
		return nil, err
	}

	// The operator's side: what is in the dead-letter queue, and why. A
	// peek locks nothing and counts as no delivery.
	dlq, err := sb.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		return nil, err
	}
	defer dlq.Close(context.Background())
	if rep.deadLetters, err = dlq.PeekMessages(ctx, 100, nil); err != nil {
		return nil, err
	}

	// The gateway is back: what failed for it is worth another try, as a
	// new message on the main queue. A malformed payment is not; it stays
	// in the dead-letter queue for someone to look at.
	pay = func(p payment) error {
		rep.paid = append(rep.paid, p.To)
		return nil
	}
	var keep []*azservicebus.ReceivedMessage // locked until all are received
	for held := 0; held < len(rep.deadLetters); {
		msgs, err := dlq.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			return nil, err
		}
		held += len(msgs)
		for _, m := range msgs {
			if m.DeadLetterReason == nil || *m.DeadLetterReason != "MaxDeliveryCountExceeded" {
				keep = append(keep, m)
				continue
			}
			// Send, then complete: a crash in between sends it twice,
			// which the same MessageID lets a queue with duplicate
			// detection drop. Message() copies what was sent, without
			// what the broker added.
			if err := sender.SendMessage(ctx, m.Message(), nil); err != nil {
				return nil, err
			}
			if err := dlq.CompleteMessage(ctx, m, nil); err != nil {
				return nil, err
			}
			rep.resubmitted = append(rep.resubmitted, m.MessageID)
		}
	}
	for _, m := range keep {
		if err := dlq.AbandonMessage(ctx, m, nil); err != nil {
			return nil, err
		}
	}
	if err := consume(ctx, receiver, len(rep.resubmitted), pay); err != nil {
		return nil, err
	}
	return rep, nil
}

// consume handles messages until n of them are settled for good:
// completed or dead-lettered.
func consume(ctx context.Context, r *azservicebus.Receiver, n int, pay func(payment) error) error {
	for n > 0 {
		msgs, err := r.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			var p payment
			if err := json.Unmarshal(m.Body, &p); err != nil {
				// Retrying cannot help: dead-letter it now, saying why.
				err = r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
					Reason: to.Ptr("MalformedPayment"), ErrorDescription: to.Ptr(err.Error()),
				})
				if err != nil {
					return err
				}
				n--
				continue
			}
			if err := pay(p); err != nil {
				// Perhaps the next try works. The broker counts the tries:
				// abandoning the last allowed one dead-letters the message.
				if err := r.AbandonMessage(ctx, m, nil); err != nil {
					return err
				}
				if m.DeliveryCount >= maxDeliveryCount {
					n--
				}
				continue
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				return err
			}
			n--
		}
	}
	return nil
}
