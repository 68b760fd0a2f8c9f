package azsdk

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

var bin string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &bin)) }

// broker is one raftbusd node with an admin client and an Azure SDK
// client on its AMQP listener.
type broker struct {
	cluster          *procs.Cluster
	admin            *admin.Client
	sb               *azservicebus.Client
	connectionString string
}

func startBroker(t testing.TB) *broker {
	t.Helper()
	c := procs.Start(t, bin, 1)
	adm, err := admin.New(c.Addrs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	// What an application changes to move to raftbus: the connection
	// string, nothing else.
	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=x;SharedAccessKey=y;UseDevelopmentEmulator=true", c.Nodes[0].AMQPAddr)
	sb, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return &broker{cluster: c, admin: adm, sb: sb, connectionString: cs}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (b *broker) queue(t testing.TB, name string) string {
	t.Helper()
	if _, err := b.admin.CreateQueue(testContext(t), name, nil); err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return name
}

func (b *broker) sender(t testing.TB, entity string) *azservicebus.Sender {
	t.Helper()
	s, err := b.sb.NewSender(entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func (b *broker) receiver(t testing.TB, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := b.sb.NewReceiverForQueue(queue, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// receiveOne receives exactly one message.
func receiveOne(t testing.TB, ctx context.Context, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(msgs) != 1 {
		t.Fatalf("received %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

func send(t testing.TB, ctx context.Context, s *azservicebus.Sender, body string) {
	t.Helper()
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
		t.Fatalf("send %q: %v", body, err)
	}
}
