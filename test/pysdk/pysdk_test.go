// Package pysdk runs the Python Azure Service Bus SDK that Debian packages
// (python3-azure: azure-servicebus on uamqp), unmodified, and a generic AMQP
// 1.0 client (python3-qpid-proton) against a raftbusd node with TLS and
// access policies, as a user of either would run it. The scenarios are
// Python unittest files next to this one; this test starts the node,
// creates the entities they use and runs them with Debian's python3.
package pysdk

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

var bin string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &bin)) }

// python is Debian's interpreter, which has the packages; another one on
// the PATH (pyenv's) does not.
const python = "/usr/bin/python3"

// amqpAddr: uamqp connects to the AMQPS port 5671 and no other.
const amqpAddr = "127.0.0.1:5671"

func TestPythonClients(t *testing.T) {
	if out, err := exec.Command(python, "-c", "import azure.servicebus, uamqp, proton").CombinedOutput(); err != nil {
		t.Fatalf("Debian's python3-azure and python3-qpid-proton are needed (apt-get install python3-azure python3-qpid-proton; scripts/test.sh installs them): %v\n%s", err, out)
	}
	c := procs.StartWith(t, bin, 1, procs.Options{TLS: true, Auth: true, AMQPAddr: amqpAddr})
	createEntities(t, raftbusv1.NewAdminServiceClient(c.Conn(0)))
	await.Until(t, 30*time.Second, "the node to write the root key", func() bool { return c.RootConnectionString() != "" })
	root, err := sas.ParseConnectionString(c.RootConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		// The node's certificate names localhost; the port is 5671.
		"RAFTBUS_PY_CONNECTION_STRING="+sas.String("sb://localhost/", root.KeyName, root.Key),
		"RAFTBUS_PY_CA="+c.CertFiles("test").CA)
	for _, suite := range []string{"servicebus_test", "proton_test"} {
		t.Run(suite, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", suite)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", suite, err, out)
			}
			// Each scenario ran and passed (and none was skipped).
			t.Logf("%s", summary(out))
			if strings.Contains(string(out), "skipped") {
				t.Fatalf("%s skipped scenarios:\n%s", suite, out)
			}
		})
	}
}

// summary is the verbose unittest lines of each scenario.
func summary(out []byte) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, " ... ") || strings.HasPrefix(l, "Ran ") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// createEntities makes what the Python scenarios use: the SDK has no way
// to create them over AMQP.
func createEntities(t *testing.T, admin raftbusv1.AdminServiceClient) {
	t.Helper()
	twoSeconds := durationpb.New(2 * time.Second)
	yes := true
	queues := []*raftbusv1.QueueProperties{
		{Name: "py-basic"}, {Name: "py-settle"}, {Name: "py-batch"}, {Name: "py-abandon"}, {Name: "py-dlq"},
		{Name: "py-defer"}, {Name: "py-peek"}, {Name: "py-schedule"}, {Name: "py-rad"}, {Name: "py-proton"},
		{Name: "py-lock", LockDuration: twoSeconds},
		{Name: "py-sessions", RequiresSession: &yes},
		{Name: "py-session-lock", RequiresSession: &yes, LockDuration: twoSeconds},
	}
	for _, q := range queues {
		create(t, "queue "+q.Name, func(ctx context.Context) error {
			_, err := admin.CreateQueue(ctx, &raftbusv1.CreateQueueRequest{Queue: q})
			return err
		})
	}
	create(t, "topic py-orders", func(ctx context.Context) error {
		_, err := admin.CreateTopic(ctx, &raftbusv1.CreateTopicRequest{Topic: &raftbusv1.TopicProperties{Name: "py-orders"}})
		return err
	})
	subs := map[string]*raftbusv1.RuleFilter{
		"all": nil,
		"eu":  {Filter: &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: "region = 'eu'"}}},
		"red": {Filter: &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: &raftbusv1.CorrelationFilter{CorrelationId: "red"}}},
	}
	for name, filter := range subs {
		req := &raftbusv1.CreateSubscriptionRequest{Subscription: &raftbusv1.SubscriptionProperties{TopicName: "py-orders", SubscriptionName: name}}
		if filter != nil {
			req.DefaultRule = &raftbusv1.RuleProperties{Name: name, Filter: filter}
		}
		create(t, "subscription "+name, func(ctx context.Context) error {
			_, err := admin.CreateSubscription(ctx, req)
			return err
		})
	}
}

// create runs op until it succeeds or finds the entity there (a retry of
// a create that took effect), while the node is still starting.
func create(t *testing.T, what string, op func(ctx context.Context) error) {
	t.Helper()
	var err error
	await.Until(t, 30*time.Second, "create "+what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = op(ctx)
		return err == nil || status.Code(err) == codes.AlreadyExists || !retryable(err)
	})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		t.Fatalf("create %s: %v", what, err)
	}
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}
