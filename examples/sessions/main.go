// Command sessions processes the messages of each session in order while
// sessions are processed in parallel. A session (here: one customer's
// cart) is locked by one consumer at a time, which gets its messages in
// the order they were sent; other consumers take other sessions.
//
//	go run ./examples/sessions [-server 127.0.0.1:7400] [-sessions 5] [-consumers 3]
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
	"sync"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const queue = "example-carts"

// steps are what each cart goes through, in this order; the last one
// ends its session.
var steps = []string{"add book", "add pen", "remove pen", "add lamp", "checkout"}

func main() {
	server := flag.String("server", serverAddr(), "raftbusd nodes, comma-separated (env RAFTBUS_ADDR)")
	sessions := flag.Int("sessions", 5, "carts, one session each")
	consumers := flag.Int("consumers", 3, "consumers taking sessions")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	got, err := run(ctx, strings.Split(*server, ","), *sessions, *consumers)
	if err != nil {
		log.Fatal(err)
	}
	for _, cart := range got {
		fmt.Printf("%s (consumer %d): %s\n", cart.id, cart.consumer, strings.Join(cart.steps, ", "))
	}
}

func serverAddr() string {
	if a := os.Getenv("RAFTBUS_ADDR"); a != "" {
		return a
	}
	return client.DefaultAddress
}

// cart is one session as a consumer processed it.
type cart struct {
	id       string
	consumer int
	steps    []string
}

// run sends the steps of every cart, interleaved, and has consumers
// process them one session at a time. It returns the carts in the order
// their processing ended.
func run(ctx context.Context, server []string, sessions, consumers int) ([]cart, error) {
	c, err := client.New(server, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := freshQueue(ctx, admin.NewFromClient(c)); err != nil {
		return nil, err
	}

	// Step by step over all carts: the queue holds the sessions mixed,
	// as they come from many customers at once. One send at a time, so
	// that each session's messages are in the order sent.
	sender, err := c.NewSender(queue, nil)
	if err != nil {
		return nil, err
	}
	for _, step := range steps {
		for s := range sessions {
			msg := &client.Message{SessionID: fmt.Sprintf("cart-%d", s), Body: []byte(step)}
			if err := sender.SendMessage(ctx, msg, nil); err != nil {
				return nil, err
			}
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		done []cart
		errs []error
		wg   sync.WaitGroup
	)
	for i := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cart, err := processNextSession(ctx, c)
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					cancel()
				} else {
					cart.consumer = i
					done = append(done, cart)
					if len(done) == sessions {
						cancel() // every cart is through
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(done) < sessions {
		return done, errors.Join(append(errs, ctx.Err())...)
	}
	return done, nil
}

// processNextSession locks a session no one else holds and processes its
// messages until its last step.
func processNextSession(ctx context.Context, c *client.Client) (cart, error) {
	// Waits until a session with messages is free (or ctx ends).
	session, err := c.AcceptNextSessionForQueue(ctx, queue, nil)
	if err != nil {
		return cart{}, err
	}
	// Closing releases the session: messages sent to it later go to
	// whichever consumer accepts it next, still in order.
	defer session.Close(context.Background())
	cart := cart{id: session.SessionID()}
	for {
		msgs, err := session.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			return cart, err
		}
		for _, m := range msgs { // in the order sent
			cart.steps = append(cart.steps, string(m.Body))
			if err := session.CompleteMessage(ctx, m, nil); err != nil {
				return cart, err
			}
			if string(m.Body) == steps[len(steps)-1] {
				return cart, nil
			}
		}
		// A consumer that holds a session longer than the queue's lock
		// duration (a minute) calls session.RenewSessionLock, or the
		// session goes to another consumer.
	}
}

// freshQueue deletes and creates the example's queue, so that what an
// interrupted run left behind does not count in this one. Sessions are
// fixed when a queue is created.
func freshQueue(ctx context.Context, adm *admin.Client) error {
	if err := adm.DeleteQueue(ctx, queue); err != nil && !errors.Is(err, client.ErrNotFound) {
		return err
	}
	_, err := adm.CreateQueue(ctx, queue, &admin.QueueProperties{RequiresSession: ptr(true)})
	return err
}

func ptr[T any](v T) *T { return &v }
