package test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/internal/certs"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestAccessPoliciesDecideWhoMayDoWhat runs three raftbusd processes with
// TLS and --auth, makes policies with the root key the nodes wrote, and
// tries every way in that must fail: no token, a wrong key, an expired or
// tampered token, a key of another entity, a Send key receiving, a Listen
// key sending or deleting, a rotated key, a deleted policy. Each is
// refused with UNAUTHORIZED and changes nothing; the right keys work.
func TestAccessPoliciesDecideWhoMayDoWhat(t *testing.T) {
	c := procs.StartWith(t, raftbusd, 3, procs.Options{TLS: true, Auth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ca, err := certs.LoadClient(certs.Files{CA: c.CertFiles("test").CA})
	if err != nil {
		t.Fatal(err)
	}
	connect := func(connectionString string) *client.Client {
		t.Helper()
		cl, err := client.NewClientFromConnectionString(connectionString, &client.ClientOptions{TLSConfig: ca,
			RetryOptions: client.RetryOptions{MaxRetries: 2, RetryDelay: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	await.Until(t, 30*time.Second, "a node to write the root key", func() bool { return c.RootConnectionString() != "" })
	keyFile := filepath.Join(c.Nodes[0].DataDir, cluster.RootKeyFile)
	await.Until(t, 30*time.Second, "n1 to write the root key", func() bool { _, err := os.Stat(keyFile); return err == nil })
	if st, _ := os.Stat(keyFile); st.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", keyFile, st.Mode().Perm())
	}
	root := connect(c.RootConnectionString())
	rootAdmin := admin.NewFromClient(root)
	for _, q := range []string{"orders", "other"} {
		if _, err := rootAdmin.CreateQueue(ctx, q, nil); err != nil {
			t.Fatalf("create %s with the root key: %v", q, err)
		}
	}
	access := raftbusv1.NewAccessServiceClient(root.AdminConn())
	policy := func(name, entity string, rights ...raftbusv1.AccessRight) *raftbusv1.AccessPolicy {
		t.Helper()
		resp, err := access.CreateAccessPolicy(ctx, &raftbusv1.CreateAccessPolicyRequest{Policy: &raftbusv1.AccessPolicy{Name: name, EntityPath: entity, Rights: rights}})
		if err != nil {
			t.Fatalf("create policy %s: %v", name, err)
		}
		return resp.GetPolicy()
	}
	endpoint := "sb://" + strings.Join(c.Addrs(), ",") + "/"
	// usable waits until every node takes key of p: each applies policy
	// changes from the metadata log, a moment after the change was
	// answered.
	usable := func(p *raftbusv1.AccessPolicy, key string) {
		t.Helper()
		await.Until(t, 10*time.Second, "every node to take the key of "+p.GetName(), func() bool {
			for i := range c.Nodes {
				cl := connect(sas.String("sb://"+c.Nodes[i].Addr+"/", p.GetName(), key))
				if _, err := raftbusv1.NewAdminServiceClient(cl.AdminConn()).GetRoutingTable(ctx, &raftbusv1.GetRoutingTableRequest{EntityPath: "orders"}); err != nil {
					return false
				}
			}
			return true
		})
	}
	sender := policy("sender", "", raftbusv1.AccessRight_ACCESS_RIGHT_SEND)
	listener := policy("listener", "orders", raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN)
	usable(sender, sender.GetPrimaryKey())
	usable(listener, listener.GetPrimaryKey())
	withKey := func(p *raftbusv1.AccessPolicy, key string) *client.Client {
		return connect(sas.String(endpoint, p.GetName(), key))
	}
	withToken := func(token string) *client.Client {
		return connect("Endpoint=" + endpoint + ";SharedAccessSignature=" + token)
	}

	send := func(cl *client.Client, queue string) error {
		s, _ := cl.NewSender(queue, nil)
		return s.SendMessage(ctx, &client.Message{Body: []byte("x")}, nil)
	}
	receive := func(cl *client.Client, queue string) error {
		r, _ := cl.NewReceiverForQueue(queue, &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
		_, err := r.ReceiveMessages(ctx, 10, &client.ReceiveMessagesOptions{MaxWaitTime: 100 * time.Millisecond})
		return err
	}
	deleteQueue := func(cl *client.Client, queue string) error {
		return admin.NewFromClient(cl).DeleteQueue(ctx, queue)
	}
	counts := func() [2]int64 {
		t.Helper()
		var out [2]int64
		for i, q := range []string{"orders", "other"} {
			rt, err := rootAdmin.GetQueueRuntimeProperties(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = rt.GetActiveMessageCount()
		}
		return out
	}

	// The right keys work.
	for range 2 {
		if err := send(withKey(sender, sender.GetPrimaryKey()), "orders"); err != nil {
			t.Fatalf("send with a Send key: %v", err)
		}
	}
	if err := send(withKey(sender, sender.GetSecondaryKey()), "other"); err != nil {
		t.Fatalf("send with the secondary key: %v", err)
	}
	before := counts()
	if before != [2]int64{2, 1} {
		t.Fatalf("counts %v, want [2 1]", before)
	}

	rootCS, _ := sas.ParseConnectionString(c.RootConnectionString())
	expired := sas.Sign(endpoint, rootCS.KeyName, rootCS.Key, time.Now().Add(-time.Minute))
	valid := sas.Sign(endpoint, rootCS.KeyName, rootCS.Key, time.Now().Add(time.Minute))
	tampered := strings.Replace(valid, "&se=", "&se=9", 1)
	noToken, err := client.New(c.Addrs(), &client.ClientOptions{TLSConfig: ca, RetryOptions: client.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer noToken.Close()

	refused := []struct {
		name string
		call func() error
		want string
	}{
		{"no token", func() error { return send(noToken, "orders") }, "no SharedAccessSignature token"},
		{"a wrong key", func() error { return send(withKey(sender, sas.NewKey()), "orders") }, "signature does not match"},
		{"an unknown key name", func() error { return send(connect(sas.String(endpoint, "nobody", sas.NewKey())), "orders") }, `no policy "nobody"`},
		{"an expired token", func() error { return deleteQueue(withToken(expired), "other") }, "expired"},
		{"a tampered token", func() error { return deleteQueue(withToken(tampered), "other") }, "signature does not match"},
		{"a key of another entity", func() error { return receive(withKey(listener, listener.GetPrimaryKey()), "other") }, `no policy "listener" covers entity other`},
		{"a Send key receiving", func() error { return receive(withKey(sender, sender.GetPrimaryKey()), "orders") }, "does not grant listen"},
		{"a Listen key sending", func() error { return send(withKey(listener, listener.GetPrimaryKey()), "orders") }, "does not grant send"},
		{"a Listen key deleting", func() error { return deleteQueue(withKey(listener, listener.GetPrimaryKey()), "orders") }, "does not grant manage"},
		{"a Send key making policies", func() error {
			_, err := raftbusv1.NewAccessServiceClient(withKey(sender, sender.GetPrimaryKey()).AdminConn()).CreateAccessPolicy(ctx,
				&raftbusv1.CreateAccessPolicyRequest{Policy: &raftbusv1.AccessPolicy{Name: "mine", Rights: []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE}}})
			return err
		}, "does not grant manage"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != client.CodeUnauthorized || ce.Retryable || !strings.Contains(ce.Message, tc.want) {
				t.Fatalf("got %v, want a non-retryable UNAUTHORIZED saying %q", err, tc.want)
			}
		})
	}
	if after := counts(); after != before {
		t.Fatalf("counts %v after the refused calls, want %v", after, before)
	}

	// The Listen key receives from its entity.
	if err := receive(withKey(listener, listener.GetPrimaryKey()), "orders"); err != nil {
		t.Fatalf("receive with a Listen key of the entity: %v", err)
	}

	// Rotation: the regenerated key stops working at once, the other one
	// goes on.
	regen, err := access.RegenerateAccessPolicyKey(ctx, &raftbusv1.RegenerateAccessPolicyKeyRequest{Name: "sender", Key: raftbusv1.AccessKey_ACCESS_KEY_PRIMARY})
	if err != nil || regen.GetPolicy().GetPrimaryKey() == sender.GetPrimaryKey() || regen.GetPolicy().GetSecondaryKey() != sender.GetSecondaryKey() {
		t.Fatalf("regenerate: %v, %v", regen, err)
	}
	await.Until(t, 10*time.Second, "every node to refuse the old key", func() bool {
		for i := range c.Nodes {
			cl := connect(sas.String("sb://"+c.Nodes[i].Addr+"/", "sender", sender.GetPrimaryKey()))
			if err := send(cl, "orders"); !errors.Is(err, client.ErrUnauthorized) {
				return false
			}
		}
		return true
	})
	if err := send(withKey(sender, sender.GetSecondaryKey()), "orders"); err != nil {
		t.Fatalf("send with the secondary key after the primary was regenerated: %v", err)
	}
	usable(regen.GetPolicy(), regen.GetPolicy().GetPrimaryKey())
	if err := send(withKey(sender, regen.GetPolicy().GetPrimaryKey()), "orders"); err != nil {
		t.Fatalf("send with the new primary key: %v", err)
	}
	if _, err := access.DeleteAccessPolicy(ctx, &raftbusv1.DeleteAccessPolicyRequest{Name: "sender"}); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 10*time.Second, "the deleted policy's keys to be refused", func() bool {
		return errors.Is(send(withKey(sender, sender.GetSecondaryKey()), "orders"), client.ErrUnauthorized)
	})
}
