package azsdk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/internal/certs"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// managed is a node with TLS and access policies and what reaches its
// management REST API: the Go SDK's administration client with the root
// key, an HTTP client trusting the node, and raftbus's own admin client.
type managed struct {
	cluster *procs.Cluster
	root    *sas.ConnectionString
	// endpoint is https://host:port of the management listener.
	endpoint string
	https    *http.Client
	sdk      *sbadmin.Client
	rc       *client.Client
	raftbus  *admin.Client
	tls      *tls.Config
}

func startManaged(t *testing.T) *managed {
	t.Helper()
	c := procs.StartWith(t, bin, 1, procs.Options{TLS: true, Auth: true})
	ca, err := certs.LoadClient(certs.Files{CA: c.CertFiles("test").CA})
	if err != nil {
		t.Fatal(err)
	}
	ca.ServerName = "127.0.0.1"
	await.Until(t, 30*time.Second, "the node to write the root key", func() bool { return c.RootConnectionString() != "" })
	root, err := sas.ParseConnectionString(c.RootConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	m := &managed{cluster: c, root: root, endpoint: "https://" + c.Nodes[0].ManagementAddr, tls: ca,
		https: &http.Client{Transport: &http.Transport{TLSClientConfig: ca}}}
	t.Cleanup(m.https.CloseIdleConnections)
	m.sdk = m.adminClient(t, root.KeyName, root.Key)
	rc, err := client.NewClientFromConnectionString(c.RootConnectionString(), &client.ClientOptions{TLSConfig: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	m.rc, m.raftbus = rc, admin.NewFromClient(rc)
	return m
}

// adminClient is the SDK's administration client with the key of
// policy keyName, as an application makes one: from a connection string
// naming the management listener.
func (m *managed) adminClient(t *testing.T, keyName, key string) *sbadmin.Client {
	t.Helper()
	cs := sas.String("sb://"+m.cluster.Nodes[0].ManagementAddr+"/", keyName, key)
	c, err := sbadmin.NewClientFromConnectionString(cs, &sbadmin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: m.https, Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: 50 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func adminContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// The Go SDK's admin.Client, unmodified, creates, reads, updates, lists
// and deletes queues, reads their counts after sends over AMQP, and gets
// the statuses Service Bus answers for conflicts and missing entities.
func TestGoAdministrationClientManagesQueues(t *testing.T) {
	m := startManaged(t)
	ctx := adminContext(t)
	created, err := m.sdk.CreateQueue(ctx, "admin-orders", &sbadmin.CreateQueueOptions{Properties: &sbadmin.QueueProperties{
		LockDuration: to.Ptr("PT30S"), MaxDeliveryCount: to.Ptr(int32(5)), DefaultMessageTimeToLive: to.Ptr("PT1H"),
		RequiresSession: to.Ptr(false), DeadLetteringOnMessageExpiration: to.Ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := *created.LockDuration; got != "PT30S" {
		t.Fatalf("created with lock duration %s", got)
	}
	if _, err := m.sdk.CreateQueue(ctx, "admin-orders", nil); statusOf(err) != http.StatusConflict {
		t.Fatalf("second create: %v", err)
	}

	// The settings are the ones raftbus's own API reads.
	q, err := m.raftbus.GetQueue(ctx, "admin-orders")
	if err != nil {
		t.Fatal(err)
	}
	if q.GetLockDuration().AsDuration() != 30*time.Second || q.GetMaxDeliveryCount() != 5 || q.GetDefaultMessageTimeToLive().AsDuration() != time.Hour {
		t.Fatalf("raftbus has %v", q)
	}

	got, err := m.sdk.GetQueue(ctx, "admin-orders", nil)
	if err != nil || got == nil {
		t.Fatalf("get: %v, %v", got, err)
	}
	props := got.QueueProperties
	props.MaxDeliveryCount = to.Ptr(int32(8))
	if _, err := m.sdk.UpdateQueue(ctx, "admin-orders", props, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := m.sdk.GetQueue(ctx, "admin-orders", nil); err != nil || *got.MaxDeliveryCount != 8 || *got.LockDuration != "PT30S" {
		t.Fatalf("after the update: %+v, %v", got, err)
	}
	if _, err := m.sdk.UpdateQueue(ctx, "admin-missing", props, nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("update of a missing queue: %v", err)
	}

	// Counts after sends, a scheduled message and a dead letter.
	sb, err := azservicebus.NewClientFromConnectionString(sas.String("sb://"+m.cluster.Nodes[0].AMQPAddr+"/", m.root.KeyName, m.root.Key),
		&azservicebus.ClientOptions{TLSConfig: m.tls})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	snd, err := sb.NewSender("admin-orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(context.Background())
	for i := range 3 {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("later")}}, time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	rcv, err := sb.NewReceiverForQueue("admin-orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(context.Background())
	msgs, err := rcv.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v, %v", msgs, err)
	}
	if err := rcv.DeadLetterMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	rt, err := m.sdk.GetQueueRuntimeProperties(ctx, "admin-orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt.ActiveMessageCount != 2 || rt.ScheduledMessageCount != 1 || rt.DeadLetterMessageCount != 1 || rt.TotalMessageCount != 4 ||
		rt.SizeInBytes <= 0 || rt.CreatedAt.IsZero() || rt.UpdatedAt.Before(rt.CreatedAt) {
		t.Fatalf("runtime properties %+v", rt.QueueRuntimeProperties)
	}

	for _, name := range []string{"admin-a", "admin-b", "admin-c"} {
		if _, err := m.sdk.CreateQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	pager := m.sdk.NewListQueuesPager(&sbadmin.ListQueuesOptions{MaxPageSize: 2})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range page.Queues {
			listed = append(listed, q.QueueName)
		}
	}
	if strings.Join(listed, ",") != "admin-a,admin-b,admin-c,admin-orders" {
		t.Fatalf("listed %v", listed)
	}

	if _, err := m.sdk.DeleteQueue(ctx, "admin-orders", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := m.sdk.GetQueue(ctx, "admin-orders", nil); err != nil || got != nil {
		t.Fatalf("get after delete: %v, %v", got, err)
	}
	if _, err := m.sdk.DeleteQueue(ctx, "admin-orders", nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("second delete: %v", err)
	}
	ns, err := m.sdk.GetNamespaceProperties(ctx, nil)
	if err != nil || ns.Name != "127.0.0.1" {
		t.Fatalf("namespace %+v, %v", ns, err)
	}
}

// Topics, subscriptions and rules with each filter, through the Go SDK.
func TestGoAdministrationClientManagesTopicsAndRules(t *testing.T) {
	m := startManaged(t)
	ctx := adminContext(t)
	if _, err := m.sdk.CreateTopic(ctx, "admin-events", &sbadmin.CreateTopicOptions{Properties: &sbadmin.TopicProperties{
		DefaultMessageTimeToLive: to.Ptr("PT10M")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.sdk.CreateSubscription(ctx, "admin-events", "audit", &sbadmin.CreateSubscriptionOptions{
		Properties: &sbadmin.SubscriptionProperties{LockDuration: to.Ptr("PT20S"), MaxDeliveryCount: to.Ptr(int32(3)),
			DefaultRule: &sbadmin.RuleProperties{Name: "eu", Filter: &sbadmin.SQLFilter{Expression: "region = 'eu'"}}}}); err != nil {
		t.Fatal(err)
	}
	sub, err := m.sdk.GetSubscription(ctx, "admin-events", "audit", nil)
	if err != nil || *sub.LockDuration != "PT20S" || *sub.MaxDeliveryCount != 3 {
		t.Fatalf("subscription %+v, %v", sub, err)
	}
	rules := []sbadmin.RuleProperties{
		{Name: "sql", Filter: &sbadmin.SQLFilter{Expression: "n > @n", Parameters: map[string]any{"@n": int64(3)}},
			Action: &sbadmin.SQLAction{Expression: "SET sys.Label = 'big'"}},
		{Name: "corr", Filter: &sbadmin.CorrelationFilter{CorrelationID: to.Ptr("c1"), Subject: to.Ptr("s"),
			ApplicationProperties: map[string]any{"region": "us"}}},
		{Name: "all", Filter: &sbadmin.TrueFilter{}},
		{Name: "none", Filter: &sbadmin.FalseFilter{}},
	}
	for _, r := range rules {
		if _, err := m.sdk.CreateRule(ctx, "admin-events", "audit", &sbadmin.CreateRuleOptions{Name: to.Ptr(r.Name), Filter: r.Filter, Action: r.Action}); err != nil {
			t.Fatalf("create rule %s: %v", r.Name, err)
		}
	}
	for _, want := range rules {
		got, err := m.sdk.GetRule(ctx, "admin-events", "audit", want.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Filter, want.Filter) || !reflect.DeepEqual(got.Action, want.Action) {
			t.Errorf("rule %s: %+v %+v, want %+v %+v", want.Name, got.Filter, got.Action, want.Filter, want.Action)
		}
	}
	// What the rules are to raftbus's own API.
	eu, err := m.raftbus.GetRule(ctx, "admin-events", "audit", "eu")
	if err != nil || eu.GetFilter().GetSqlFilter().GetSqlExpression() != "region = 'eu'" {
		t.Fatalf("the default rule is %v (%v)", eu, err)
	}
	var names []string
	pager := m.sdk.NewListRulesPager("admin-events", "audit", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rules {
			names = append(names, r.Name)
		}
	}
	if strings.Join(names, ",") != "all,corr,eu,none,sql" {
		t.Fatalf("rules %v", names)
	}
	if _, err := m.sdk.UpdateRule(ctx, "admin-events", "audit", sbadmin.RuleProperties{Name: "sql", Filter: &sbadmin.SQLFilter{Expression: "n > 10"}}); err != nil {
		t.Fatal(err)
	}
	if r, err := m.raftbus.GetRule(ctx, "admin-events", "audit", "sql"); err != nil || r.GetFilter().GetSqlFilter().GetSqlExpression() != "n > 10" || r.GetAction() != nil {
		t.Fatalf("updated rule %v (%v)", r, err)
	}
	if _, err := m.sdk.DeleteRule(ctx, "admin-events", "audit", "none", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := m.sdk.GetRule(ctx, "admin-events", "audit", "none", nil); err != nil || got != nil {
		t.Fatalf("deleted rule: %v, %v", got, err)
	}
	trt, err := m.sdk.GetTopicRuntimeProperties(ctx, "admin-events", nil)
	if err != nil || trt.SubscriptionCount != 1 {
		t.Fatalf("topic runtime %+v, %v", trt, err)
	}
	if _, err := m.sdk.DeleteSubscription(ctx, "admin-events", "audit", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.sdk.DeleteTopic(ctx, "admin-events", nil); err != nil {
		t.Fatal(err)
	}
}

// A key without Manage gets 401 and changes nothing.
func TestManagementNeedsManage(t *testing.T) {
	m := startManaged(t)
	ctx := adminContext(t)
	resp, err := raftbusv1.NewAccessServiceClient(m.rc.AdminConn()).CreateAccessPolicy(ctx, &raftbusv1.CreateAccessPolicyRequest{
		Policy: &raftbusv1.AccessPolicy{Name: "sender", Rights: []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_SEND}}})
	if err != nil {
		t.Fatal(err)
	}
	sender := m.adminClient(t, "sender", resp.GetPolicy().GetPrimaryKey())
	if _, err := sender.CreateQueue(ctx, "admin-denied", nil); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("create with a Send key: %v", err)
	}
	wrong := m.adminClient(t, m.root.KeyName, "d3Jvbmc=")
	if _, err := wrong.GetQueue(ctx, "admin-denied", nil); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("get with a wrong key: %v", err)
	}
	if _, err := m.raftbus.GetQueue(ctx, "admin-denied"); err == nil {
		t.Fatal("the refused create made the queue")
	}
}

// Bad bodies and names sent straight to the node are 400 with a reason,
// and the queue they aim at is as it was.
func TestBadManagementRequestsChangeNothing(t *testing.T) {
	m := startManaged(t)
	ctx := adminContext(t)
	if _, err := m.sdk.CreateQueue(ctx, "admin-q", &sbadmin.CreateQueueOptions{Properties: &sbadmin.QueueProperties{MaxDeliveryCount: to.Ptr(int32(4))}}); err != nil {
		t.Fatal(err)
	}
	before, err := m.raftbus.GetQueue(ctx, "admin-q")
	if err != nil {
		t.Fatal(err)
	}
	entry := func(inner string) string {
		return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
			inner + `</QueueDescription></content></entry>`
	}
	laughs := `<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>` +
		entry("<MaxDeliveryCount>&c;</MaxDeliveryCount>")
	for _, c := range []struct{ name, path, body, want string }{
		{"malformed", "/admin-q", `<entry><content><QueueDescription><MaxDeliveryCount>9`, "malformed XML"},
		{"billion laughs", "/admin-q", laughs, "document type declaration"},
		{"oversized", "/admin-q", entry("<ForwardTo>" + strings.Repeat("x", 2<<20) + "</ForwardTo>"), "larger than"},
		{"invalid value", "/admin-q", entry("<MaxDeliveryCount>many</MaxDeliveryCount>"), "MaxDeliveryCount"},
		{"out of range", "/admin-q", entry("<LockDuration>PT10M</LockDuration>"), "lock_duration"},
		{"bad name", "/admin~q", entry(""), "not allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, m.endpoint+c.path+"?api-version=2021-05", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", sas.Sign(m.endpoint, m.root.KeyName, m.root.Key, time.Now().Add(time.Hour)))
			req.Header.Set("If-Match", "*")
			resp, err := m.https.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
				t.Fatalf("%s: %s, want 400 saying %q", resp.Status, body, c.want)
			}
			after, err := m.raftbus.GetQueue(ctx, "admin-q")
			if err != nil || after.GetUpdatedAt().AsTime() != before.GetUpdatedAt().AsTime() || after.GetMaxDeliveryCount() != 4 {
				t.Fatalf("the queue changed: %v (%v)", after, err)
			}
		})
	}
}
