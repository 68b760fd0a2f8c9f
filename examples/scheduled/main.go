// Command scheduled sends messages that the queue holds back until a set
// time, and cancels one before it is due. A scheduled message is stored
// (and replicated) at once, but no receiver sees it before its time; its
// sequence number is the handle to cancel it by.
//
//	go run ./examples/scheduled [-server 127.0.0.1:7400] [-in 3s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const queue = "example-reminders"

func main() {
	server := flag.String("server", serverAddr(), "raftbusd nodes, comma-separated (env RAFTBUS_ADDR)")
	in := flag.Duration("in", 3*time.Second, "how far ahead the first reminder is due")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	pending, got, err := run(ctx, strings.Split(*server, ","), *in)
	if err != nil {
		log.Fatal(err)
	}
	const clock = "15:04:05.000"
	for _, m := range pending {
		fmt.Printf("scheduled #%d %q for %s\n", m.SequenceNumber, m.Body, m.ScheduledEnqueueTime.Format(clock))
	}
	for _, m := range got {
		fmt.Printf("received #%d %q at %s\n", m.SequenceNumber, m.Body, m.receivedAt.Format(clock))
	}
}

func serverAddr() string {
	if a := os.Getenv("RAFTBUS_ADDR"); a != "" {
		return a
	}
	return client.DefaultAddress
}

// received is a reminder and when it arrived.
type received struct {
	*client.ReceivedMessage
	receivedAt time.Time
}

// reminders are scheduled in, 2*in and 3*in from now; the second is
// cancelled.
var reminders = []string{"stand up", "call the dentist", "water the plants"}

// run schedules the reminders, cancels the second, and receives the
// others as they fall due. It returns what a peek found scheduled after
// the cancel, and what was received.
func run(ctx context.Context, server []string, in time.Duration) (pending []*client.ReceivedMessage, got []received, err error) {
	c, err := client.New(server, nil)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	if err := freshQueue(ctx, admin.NewFromClient(c)); err != nil {
		return nil, nil, err
	}
	sender, err := c.NewSender(queue, nil)
	if err != nil {
		return nil, nil, err
	}

	now := time.Now()
	seqs := make([]int64, len(reminders))
	for i, text := range reminders {
		s, err := sender.ScheduleMessages(ctx, []*client.Message{{Body: []byte(text)}}, now.Add(time.Duration(i+1)*in), nil)
		if err != nil {
			return nil, nil, err
		}
		seqs[i] = s[0]
	}
	// Once cancelled, a scheduled message is gone: it never becomes
	// active. Cancelling one that has become active already fails with
	// ErrNotFound.
	if err := sender.CancelScheduledMessages(ctx, seqs[1:2], nil); err != nil {
		return nil, nil, err
	}

	receiver, err := c.NewReceiverForQueue(queue, nil)
	if err != nil {
		return nil, nil, err
	}
	defer receiver.Close(context.Background())
	// A peek shows scheduled messages (State MessageStateScheduled); a
	// receive does not.
	if pending, err = receiver.PeekMessages(ctx, 10, nil); err != nil {
		return nil, nil, err
	}
	for len(got) < len(reminders)-1 {
		// Blocks until a reminder is due: the receiver need not know when.
		// A due message is enqueued as if sent then, with a new sequence
		// number, as in Service Bus.
		msgs, err := receiver.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			return pending, got, err
		}
		for _, m := range msgs {
			got = append(got, received{m, time.Now()})
			if err := receiver.CompleteMessage(ctx, m, nil); err != nil {
				return pending, got, err
			}
		}
	}
	return pending, got, nil
}

// freshQueue deletes and creates the example's queue, so that what an
// interrupted run left behind does not count in this one.
func freshQueue(ctx context.Context, adm *admin.Client) error {
	if err := adm.DeleteQueue(ctx, queue); err != nil && !errors.Is(err, client.ErrNotFound) {
		return err
	}
	_, err := adm.CreateQueue(ctx, queue, nil)
	return err
}
