package client_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

// raftbusd is the server binary the tests run, built once.
var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

// env is a running cluster with a client and an admin client on it.
type env struct {
	t       *testing.T
	cluster *procs.Cluster
	c       *client.Client
	admin   *admin.Client
}

func startEnv(t *testing.T, nodes int) *env {
	t.Helper()
	cl := procs.Start(t, raftbusd, nodes)
	var addrs []string
	for _, n := range cl.Nodes {
		addrs = append(addrs, n.Addr)
	}
	c, err := client.New(addrs, &client.ClientOptions{RetryOptions: client.RetryOptions{MaxRetries: 20, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &env{t: t, cluster: cl, c: c, admin: admin.NewFromClient(c)}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) createQueue(name string, props *admin.QueueProperties) {
	e.t.Helper()
	if _, err := e.admin.CreateQueue(ctxT(e.t, 30*time.Second), name, props); err != nil {
		e.t.Fatalf("create queue %s: %v", name, err)
	}
}

func (e *env) sender(path string) *client.Sender {
	e.t.Helper()
	s, err := e.c.NewSender(path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) receiver(queue string, opts *client.ReceiverOptions) *client.Receiver {
	e.t.Helper()
	r, err := e.c.NewReceiverForQueue(queue, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// receiveN receives until n messages arrived or ctx ends.
func receiveN(t *testing.T, ctx context.Context, r *client.Receiver, n int) []*client.ReceivedMessage {
	t.Helper()
	var got []*client.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			t.Fatalf("receive after %d of %d messages: %v", len(got), n, err)
		}
		got = append(got, msgs...)
	}
	return got
}

func adminOf(c *client.Client) *admin.Client { return admin.NewFromClient(c) }
