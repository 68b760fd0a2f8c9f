// Command workqueue is the work queue of ../../workqueue written with the
// Azure SDK for Go (azservicebus) over AMQP 1.0: several receivers
// compete for the jobs of one queue in peek-lock mode and complete each.
// Only the connection string tells it runs against raftbus.
//
//	go run ./workqueue [-server 127.0.0.1:7400] [-connection-string ...] [-jobs 100] [-workers 4]
//
// (from examples/azsdk, a module of its own so that raftbus does not
// depend on the Azure SDK).
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

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

const queue = "example-az-jobs"

func main() {
	server := flag.String("server", env("RAFTBUS_ADDR", client.DefaultAddress), "raftbusd nodes for creating the queue (env RAFTBUS_ADDR)")
	cs := flag.String("connection-string", env("SERVICEBUS_CONNECTION_STRING", localConnectionString), "for the SDK (env SERVICEBUS_CONNECTION_STRING)")
	jobs := flag.Int("jobs", 100, "jobs to send")
	workers := flag.Int("workers", 4, "competing consumers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if err := createQueue(ctx, strings.Split(*server, ",")); err != nil {
		log.Fatal(err)
	}
	done, err := run(ctx, *cs, *jobs, *workers)
	if err != nil {
		log.Fatal(err)
	}
	for w, jobs := range done {
		fmt.Printf("worker %d did %d jobs\n", w, len(jobs))
	}
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
	_, err = adm.CreateQueue(ctx, queue, nil)
	return err
}

// run sends the jobs and has workers consume them until all are done. It
// returns the jobs each worker completed.
func run(ctx context.Context, connectionString string, jobs, workers int) ([][]string, error) {
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
	// Batches of one partition go all or nothing, in one round trip.
	batch, err := sender.NewMessageBatch(ctx, nil)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		id := fmt.Sprintf("job-%03d", i)
		m := &azservicebus.Message{MessageID: to.Ptr(id), Body: []byte("resize image " + id)}
		if err := batch.AddMessage(m, nil); errors.Is(err, azservicebus.ErrMessageTooLarge) {
			if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
				return nil, err
			}
			if batch, err = sender.NewMessageBatch(ctx, nil); err != nil {
				return nil, err
			}
			err = batch.AddMessage(m, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
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
			done[w], errs[w] = work(ctx, sb, func() {
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
func work(ctx context.Context, sb *azservicebus.Client, jobDone func()) ([]string, error) {
	// A receiver per worker: a link of its own on the client's connection.
	receiver, err := sb.NewReceiverForQueue(queue, nil)
	if err != nil {
		return nil, err
	}
	defer receiver.Close(context.Background())
	var done []string
	for {
		// Waits for at least one job. The jobs a worker holds are locked
		// away from the others until it settles them.
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
			var sbErr *azservicebus.Error
			if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost {
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
