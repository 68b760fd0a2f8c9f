// Command deadletter shows what happens to messages a consumer cannot
// process, and how an operator brings them back. A message that cannot
// ever succeed (malformed) is dead-lettered at once with a reason; one
// that fails on every try (its payment gateway is down) is abandoned
// until the queue's MaxDeliveryCount moves it to the dead-letter queue.
// Then the dead-letter queue is inspected, and once the gateway is back
// the failed payment is resubmitted to the main queue and succeeds.
//
//	go run ./examples/deadletter [-server 127.0.0.1:7400]
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

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const (
	queue            = "example-payments"
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
	deadLetters []*client.ReceivedMessage
	resubmitted []string
}

func main() {
	server := flag.String("server", serverAddr(), "raftbusd nodes, comma-separated (env RAFTBUS_ADDR)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	r, err := run(ctx, strings.Split(*server, ","))
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range r.deadLetters {
		fmt.Printf("dead letter #%d %s, delivery count %d: %s: %s\n",
			m.SequenceNumber, m.Body, m.DeliveryCount, m.DeadLetterReason, m.DeadLetterErrorDescription)
	}
	fmt.Println("resubmitted:", strings.Join(r.resubmitted, ", "))
	fmt.Println("paid:", strings.Join(r.paid, ", "))
}

func serverAddr() string {
	if a := os.Getenv("RAFTBUS_ADDR"); a != "" {
		return a
	}
	return client.DefaultAddress
}

func run(ctx context.Context, server []string) (*report, error) {
	c, err := client.New(server, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	adm := admin.NewFromClient(c)
	if err := freshQueue(ctx, adm); err != nil {
		return nil, err
	}
	sender, err := c.NewSender(queue, nil)
	if err != nil {
		return nil, err
	}
	for i, body := range payments {
		m := &client.Message{MessageID: fmt.Sprintf("payment-%d", i+1), Body: []byte(body)}
		if err := sender.SendMessage(ctx, m, nil); err != nil {
			return nil, err
		}
	}
	receiver, err := c.NewReceiverForQueue(queue, nil)
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
	dlq, err := c.NewReceiverForQueue(queue, &client.ReceiverOptions{SubQueue: client.SubQueueDeadLetter})
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
	var keep []*client.ReceivedMessage // locked until all are received
	for held := 0; held < len(rep.deadLetters); {
		msgs, err := dlq.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			return nil, err
		}
		held += len(msgs)
		for _, m := range msgs {
			if m.DeadLetterReason != "MaxDeliveryCountExceeded" {
				keep = append(keep, m)
				continue
			}
			// Send, then complete: a crash in between sends it twice,
			// which the same MessageID lets a queue with duplicate
			// detection drop.
			if err := sender.SendMessage(ctx, resubmission(m), nil); err != nil {
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
func consume(ctx context.Context, r *client.Receiver, n int, pay func(payment) error) error {
	for n > 0 {
		msgs, err := r.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			var p payment
			if err := json.Unmarshal(m.Body, &p); err != nil {
				// Retrying cannot help: dead-letter it now, saying why.
				reason, desc := "MalformedPayment", err.Error()
				err = r.DeadLetterMessage(ctx, m, &client.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
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

// resubmission is a dead letter as a new message: what was sent, without
// what the broker added (sequence number, delivery count, reason).
func resubmission(m *client.ReceivedMessage) *client.Message {
	return &client.Message{
		MessageID: m.MessageID, Body: m.Body, ContentType: m.ContentType,
		CorrelationID: m.CorrelationID, Subject: m.Subject, To: m.To,
		ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID,
		SessionID: m.SessionID, PartitionKey: m.PartitionKey,
		ApplicationProperties: m.ApplicationProperties,
	}
}

// freshQueue deletes and creates the example's queue, so that what an
// interrupted run left behind does not count in this one.
func freshQueue(ctx context.Context, adm *admin.Client) error {
	if err := adm.DeleteQueue(ctx, queue); err != nil && !errors.Is(err, client.ErrNotFound) {
		return err
	}
	_, err := adm.CreateQueue(ctx, queue, &admin.QueueProperties{MaxDeliveryCount: ptr(int32(maxDeliveryCount))})
	return err
}

func ptr[T any](v T) *T { return &v }
