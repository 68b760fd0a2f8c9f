package azsdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/internal/certs"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestSDKWithAccessPolicies runs a node with TLS and --auth: the SDK's
// connection string names a policy and its key, and the AMQP listener
// checks the tokens the SDK puts on $cbs against the access policies as
// the gRPC API checks its tokens. A Send key sends and cannot receive, a
// Listen key of one entity receives, settles and peeks there and nowhere
// else, a wrong key or an expired token gets nothing, and a rotated key
// stops working on a connection that is already open.
func TestSDKWithAccessPolicies(t *testing.T) {
	c := procs.StartWith(t, bin, 1, procs.Options{TLS: true, Auth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ca, err := certs.LoadClient(certs.Files{CA: c.CertFiles("test").CA})
	if err != nil {
		t.Fatal(err)
	}
	await.Until(t, 30*time.Second, "the node to write the root key", func() bool { return c.RootConnectionString() != "" })
	root, err := client.NewClientFromConnectionString(c.RootConnectionString(), &client.ClientOptions{TLSConfig: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	adm := admin.NewFromClient(root)
	for _, q := range []string{"orders", "other"} {
		if _, err := adm.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Mixed case: the SDK signs a lower-cased audience.
	if _, err := adm.CreateTopic(ctx, "Events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateSubscription(ctx, "Events", "All", nil, nil); err != nil {
		t.Fatal(err)
	}
	policies := raftbusv1.NewAccessServiceClient(root.AdminConn())
	policy := func(name, entity string, rights ...raftbusv1.AccessRight) *raftbusv1.AccessPolicy {
		t.Helper()
		resp, err := policies.CreateAccessPolicy(ctx, &raftbusv1.CreateAccessPolicyRequest{Policy: &raftbusv1.AccessPolicy{Name: name, EntityPath: entity, Rights: rights}})
		if err != nil {
			t.Fatalf("create policy %s: %v", name, err)
		}
		return resp.GetPolicy()
	}
	sender := policy("sender", "", raftbusv1.AccessRight_ACCESS_RIGHT_SEND)
	listener := policy("listener", "orders", raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN)
	eventsListener := policy("listener", "Events", raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN)

	tlsConfig := ca.Clone()
	tlsConfig.ServerName = "127.0.0.1"
	endpoint := "sb://" + c.Nodes[0].AMQPAddr
	sdk := func(connectionString string) *azservicebus.Client {
		t.Helper()
		sb, err := azservicebus.NewClientFromConnectionString(connectionString, &azservicebus.ClientOptions{TLSConfig: tlsConfig,
			RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close(context.Background()) })
		return sb
	}
	withKey := func(p *raftbusv1.AccessPolicy, key string) *azservicebus.Client {
		return sdk(fmt.Sprintf("Endpoint=%s;SharedAccessKeyName=%s;SharedAccessKey=%s", endpoint, p.GetName(), key))
	}
	send := func(sb *azservicebus.Client, entity, body string) error {
		s, err := sb.NewSender(entity, nil)
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil)
	}
	receiver := func(sb *azservicebus.Client, entity string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
		t.Helper()
		var r *azservicebus.Receiver
		var err error
		if topic, sub, ok := strings.Cut(entity, "/"); ok {
			r, err = sb.NewReceiverForSubscription(topic, sub, opts)
		} else {
			r, err = sb.NewReceiverForQueue(entity, opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(context.Background()) })
		return r
	}
	receive := func(r *azservicebus.Receiver) ([]*azservicebus.ReceivedMessage, error) {
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return r.ReceiveMessages(short, 1, nil)
	}
	unauthorized := func(what string, err error) {
		t.Helper()
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("%s: got %v, want an unauthorized error", what, err)
		}
	}

	sendKey := withKey(sender, sender.GetPrimaryKey())
	for _, entity := range []string{"orders", "other", "Events"} {
		if err := send(sendKey, entity, "to "+entity); err != nil {
			t.Fatalf("send to %s with the Send key: %v", entity, err)
		}
	}
	_, err = receive(receiver(sendKey, "orders", nil))
	unauthorized("receive with the Send key", err)

	listenKey := withKey(listener, listener.GetPrimaryKey())
	unauthorized("send with the Listen key", send(listenKey, "orders", "x"))
	_, err = receive(receiver(listenKey, "other", nil))
	unauthorized("receive from another queue with a key of orders", err)
	r := receiver(listenKey, "orders", nil)
	msgs, err := receive(r)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "to orders" {
		t.Fatalf("receive with the Listen key: %v, %v", msgs, err)
	}
	if err := r.RenewMessageLock(ctx, msgs[0], nil); err != nil {
		t.Fatalf("renew a lock with the Listen key: %v", err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("complete with the Listen key: %v", err)
	}
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil {
		t.Fatalf("peek with the Listen key: %v", err)
	}

	// The subscription of a mixed-case topic, addressed as the SDK does
	// (Subscriptions, capital S) and signed lower-cased.
	events := withKey(eventsListener, eventsListener.GetPrimaryKey())
	msgs, err = receive(receiver(events, "Events/All", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}))
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "to Events" {
		t.Fatalf("receive from Events/All with the topic's Listen key: %v, %v", msgs, err)
	}

	unauthorized("send with a wrong key", send(withKey(sender, sas.NewKey()), "orders", "x"))
	expired := sas.Sign("amqp://"+c.Nodes[0].AMQPAddr+"/orders", sender.GetName(), sender.GetPrimaryKey(), time.Now().Add(-time.Minute))
	unauthorized("send with an expired token", send(sdk(fmt.Sprintf("Endpoint=%s;SharedAccessSignature=%s", endpoint, expired)), "orders", "x"))

	// A rotated key: the connection holds a token signed with the old
	// one, which stops working at its next use.
	s, err := sendKey.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("before rotation")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := policies.RegenerateAccessPolicyKey(ctx, &raftbusv1.RegenerateAccessPolicyKeyRequest{Name: "sender", Key: raftbusv1.AccessKey_ACCESS_KEY_PRIMARY}); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 10*time.Second, "the old key to stop working", func() bool {
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte("after rotation")}, nil) != nil
	})

	// What the refused calls left: orders held one message sent with the
	// Send key (completed) and "before rotation", plus any sends that
	// went through before the rotation took effect.
	rt, err := adm.GetQueueRuntimeProperties(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if rt.GetActiveMessageCount() != 1 {
		t.Fatalf("other holds %d messages, want the 1 sent with the Send key", rt.GetActiveMessageCount())
	}
}
