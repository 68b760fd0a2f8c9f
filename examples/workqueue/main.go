// Command workqueue is a work queue with competing consumers: one queue,
// several workers receiving from it at once in peek-lock mode. The broker
// hands each job to one worker at a time, and a job leaves the queue only
// when the worker that holds it completes it, so a worker that dies
// mid-job loses nothing: its lock runs out and another worker gets the
// job.
//
//	go run ./examples/workqueue [-server 127.0.0.1:7400] [-jobs 100] [-workers 4]
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
	"sync/atomic"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const queue = "example-jobs"

func main() {
	server := flag.String("server", serverAddr(), "raftbusd nodes, comma-separated (env RAFTBUS_ADDR)")
	jobs := flag.Int("jobs", 100, "jobs to send")
	workers := flag.Int("workers", 4, "competing consumers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	done, err := run(ctx, strings.Split(*server, ","), *jobs, *workers)
	if err != nil {
		log.Fatal(err)
	}
	for w, jobs := range done {
		fmt.Printf("worker %d did %d jobs\n", w, len(jobs))
	}
}

func serverAddr() string {
	if a := os.Getenv("RAFTBUS_ADDR"); a != "" {
		return a
	}
	return client.DefaultAddress
}

// run sends jobs to a fresh queue and has workers consume them until all
// are done. It returns the jobs each worker completed.
func run(ctx context.Context, server []string, jobs, workers int) ([][]string, error) {
	c, err := client.New(server, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := freshQueue(ctx, admin.NewFromClient(c)); err != nil {
		return nil, err
	}

	// Send first, then consume: with the jobs already queued, the
	// workers race for them, which is the point of the example.
	sender, err := c.NewSender(queue, nil)
	if err != nil {
		return nil, err
	}
	batch := make([]*client.Message, jobs)
	for i := range batch {
		id := fmt.Sprintf("job-%03d", i)
		batch[i] = &client.Message{MessageID: id, Body: []byte("resize image " + id)}
	}
	if err := sender.SendMessages(ctx, batch); err != nil {
		return nil, err
	}

	// The workers stop once every job is done; a real worker would run
	// until it is shut down.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		left atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, workers)
		done = make([][]string, workers)
	)
	left.Store(int64(jobs))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[w], errs[w] = work(ctx, c, func() {
				if left.Add(-1) == 0 {
					cancel()
				}
			})
		}()
	}
	wg.Wait()
	if left.Load() > 0 {
		return done, errors.Join(append(errs, ctx.Err())...)
	}
	return done, nil
}

// work is one consumer: it receives a few jobs at a time, does each and
// completes it, until ctx ends. It returns the jobs it completed.
func work(ctx context.Context, c *client.Client, jobDone func()) ([]string, error) {
	// Each worker has a receiver of its own, as a separate process would.
	receiver, err := c.NewReceiverForQueue(queue, nil)
	if err != nil {
		return nil, err
	}
	defer receiver.Close(context.Background())
	var done []string
	for {
		// A small batch: the jobs a worker holds are locked away from the
		// others until it settles them.
		msgs, err := receiver.ReceiveMessages(ctx, 5, nil)
		if ctx.Err() != nil {
			return done, nil
		}
		if err != nil {
			return done, err
		}
		for _, m := range msgs {
			// The work itself goes here. It must be safe to do twice:
			// delivery is at least once, should this lock be lost.
			err := receiver.CompleteMessage(ctx, m, nil)
			if errors.Is(err, client.ErrLockLost) {
				continue // another worker has it now
			}
			if err != nil {
				return done, err
			}
			done = append(done, m.MessageID)
			jobDone()
		}
	}
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
