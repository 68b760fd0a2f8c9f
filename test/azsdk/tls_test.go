package azsdk

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/procs"
)

// TestSDKOverTLS: a node with TLS serves AMQP over TLS with its
// certificate; the SDK, trusting the cluster's CA, uses it without a
// client certificate and without the emulator switch.
func TestSDKOverTLS(t *testing.T) {
	c := procs.StartWith(t, bin, 1, procs.Options{TLS: true})
	ctx := testContext(t)
	adm, err := admin.New(c.Addrs(), &client.ClientOptions{TLSConfig: c.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.CreateQueue(ctx, "secure", nil); err != nil {
		t.Fatal(err)
	}
	tlsConfig := c.ClientTLS().Clone()
	tlsConfig.Certificates, tlsConfig.GetClientCertificate = nil, nil
	// The SDK would check the certificate against "host:port" when the
	// endpoint names a port; on the default port 5671 this is not needed.
	tlsConfig.ServerName = "127.0.0.1"
	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=x;SharedAccessKey=y", c.Nodes[0].AMQPAddr)
	sb, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{TLSConfig: tlsConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	s, err := sb.NewSender("secure", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	send(t, ctx, s, "over tls")
	r, err := sb.NewReceiverForQueue("secure", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if m := receiveOne(t, ctx, r); string(m.Body) != "over tls" {
		t.Fatalf("received %q", m.Body)
	}

	// The emulator switch means plaintext: the TLS listener refuses it.
	plain, err := azservicebus.NewClientFromConnectionString(cs+";UseDevelopmentEmulator=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	ps, err := plain.NewSender("secure", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := ps.SendMessage(short, &azservicebus.Message{Body: []byte("x")}, nil); err == nil {
		t.Fatal("a plaintext connection to the TLS listener sent a message")
	}
}
