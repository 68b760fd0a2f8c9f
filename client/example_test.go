package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/raftbus/raftbus/client"
)

// These examples need a running broker (go run ./cmd/raftbusd) with a
// queue "orders" (raftbus queue create orders), so they have no Output.

func Example_sendAndReceive() {
	c, err := client.New([]string{"127.0.0.1:7400"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sender, err := c.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	// A MessageID makes the send safe to retry when its outcome is
	// unknown (with duplicate detection on the queue).
	err = sender.SendMessage(ctx, &client.Message{
		MessageID:             "order-1",
		Body:                  []byte(`{"item":"book"}`),
		ContentType:           "application/json",
		ApplicationProperties: map[string]any{"priority": 3},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	receiver, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := receiver.ReceiveMessages(ctx, 10, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.MessageID, m.Body)
		if err := receiver.CompleteMessage(ctx, m, nil); errors.Is(err, client.ErrLockLost) {
			// The lock expired: the message will be (or was) delivered again.
			continue
		} else if err != nil {
			log.Fatal(err)
		}
	}
}

func Example_messageBatch() {
	c, err := client.New([]string{"127.0.0.1:7400"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	sender, _ := c.NewSender("orders", nil)

	batch, err := sender.NewMessageBatch(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 100 {
		m := &client.Message{Body: fmt.Appendf(nil, "line %d", i)}
		if err := batch.AddMessage(m, nil); errors.Is(err, client.ErrMessageTooLarge) {
			// Full: send it and start another.
			if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
				log.Fatal(err)
			}
			batch, _ = sender.NewMessageBatch(ctx, nil)
			if err := batch.AddMessage(m, nil); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
		log.Fatal(err)
	}
}

func Example_scheduling() {
	c, err := client.New([]string{"127.0.0.1:7400"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	sender, _ := c.NewSender("orders", nil)

	seqs, err := sender.ScheduleMessages(ctx, []*client.Message{{Body: []byte("reminder")}}, time.Now().Add(time.Hour), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("scheduled as", seqs[0])
	// Changed our mind.
	if err := sender.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		log.Fatal(err)
	}
}

func Example_deadLetter() {
	c, err := client.New([]string{"127.0.0.1:7400"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	receiver, _ := c.NewReceiverForQueue("orders", nil)
	msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	reason, desc := "BadFormat", "the body is not JSON"
	for _, m := range msgs {
		if err := receiver.DeadLetterMessage(ctx, m, &client.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
			log.Fatal(err)
		}
	}

	// Inspect and clear the dead-letter sub-queue.
	dlq, _ := c.NewReceiverForQueue("orders", &client.ReceiverOptions{SubQueue: client.SubQueueDeadLetter})
	dead, err := dlq.ReceiveMessages(ctx, 10, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range dead {
		fmt.Printf("%d dead-lettered: %s (%s)\n", m.SequenceNumber, m.DeadLetterReason, m.DeadLetterErrorDescription)
		_ = dlq.CompleteMessage(ctx, m, nil)
	}
}

func Example_sessions() {
	c, err := client.New([]string{"127.0.0.1:7400"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A queue created with: raftbus queue create carts --requires-session
	sender, _ := c.NewSender("carts", nil)
	for _, item := range []string{"add book", "add pen", "checkout"} {
		if err := sender.SendMessage(ctx, &client.Message{SessionID: "customer-7", Body: []byte(item)}, nil); err != nil {
			log.Fatal(err)
		}
	}

	session, err := c.AcceptNextSessionForQueue(ctx, "carts", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close(context.Background())
	state, _ := session.GetSessionState(ctx, nil)
	fmt.Printf("session %s, state %q\n", session.SessionID(), state)
	msgs, err := session.ReceiveMessages(ctx, 10, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs { // in the order sent
		fmt.Println(string(m.Body))
		_ = session.CompleteMessage(ctx, m, nil)
	}
	_ = session.SetSessionState(ctx, []byte("checked out"), nil)
}

func Example_processor() {
	c, err := client.New([]string{"127.0.0.1:7400"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p, err := c.NewProcessorForQueue("orders", func(ctx context.Context, ev *client.ProcessMessageEvent) error {
		fmt.Printf("processing %s\n", ev.Message.Body)
		// nil completes the message; an error abandons it for another try.
		return nil
	}, &client.ProcessorOptions{MaxConcurrentCalls: 8, PrefetchCount: 16})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(10 * time.Second)
		// Stop taking messages; give running handlers 5s to finish.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	}()
	if err := p.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
