package console_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

// browser is a headless Chromium driven through the DevTools protocol;
// scripts/test.sh installs Debian's chromium when it is missing.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: install it (apt-get install chromium; scripts/test.sh does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Do starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// pageTimeout bounds the steps of one run on a page.
const pageTimeout = 30 * time.Second

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// open loads url and waits for sel; confirm() answers yes on the page,
// as a user who clicks OK.
func open(t *testing.T, ctx context.Context, url, sel string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)), acceptConfirms())
}

func acceptConfirms() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(window.confirm = () => true, true)`)(ctx, tg)
		return err
	})
}

// text is the text of the element sel on the current page.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := read(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func value(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := read(ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("value of %s: %v", sel, err)
	}
	return s
}

// read runs a query of the current page. A page that a form's redirect
// replaces can drop the node the query found before it is read ("No node
// with given id found"); the query then runs again, on the new page.
func read(ctx context.Context, query chromedp.Action[string]) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	for {
		s, err := chromedp.Run(ctx, query)
		if err == nil || !strings.Contains(err.Error(), "No node with given id found") || ctx.Err() != nil {
			return s, err
		}
	}
}

// shot saves a screenshot of the current page as name.png in the folder
// RAFTBUS_CONSOLE_SCREENSHOTS names, when set: the pictures in docs/operations.md are
// made with RAFTBUS_CONSOLE_SCREENSHOTS=docs/console go test ./console.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("RAFTBUS_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustContain(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

func counts(t *testing.T, ad *admin.Client, queue string) *raftbusv1.RuntimeProperties {
	t.Helper()
	rt, err := ad.GetQueueRuntimeProperties(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestConsoleShowsAndFixesWhatIsInTheBroker(t *testing.T) {
	c := procs.Start(t, raftbusd, 1)
	cl, err := client.New(c.Addrs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ad := admin.NewFromClient(cl)
	ctx := context.Background()
	if _, err := ad.CreateQueue(ctx, "orders", &raftbusv1.QueueProperties{PartitionCount: ptr(uint32(2))}); err != nil {
		t.Fatal(err)
	}
	s, _ := cl.NewSender("orders", nil)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte(`{"order":"` + id + `","items":[1,2]}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := cl.NewReceiverForQueue("orders", nil)
	var bad *client.ReceivedMessage
	await.Until(t, 10*time.Second, "order b to be received", func() bool {
		msgs, err := r.ReceiveMessages(ctx, 3, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.MessageID == "b" {
				bad = m
			} else if err := r.AbandonMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		return bad != nil
	})
	if err := r.DeadLetterMessage(ctx, bad, &client.DeadLetterOptions{Reason: ptr("no such item"), ErrorDescription: ptr("item 7 is unknown")}); err != nil {
		t.Fatal(err)
	}

	b := browser(t)
	base := "http://" + c.Nodes[0].HTTPAddr

	// Cluster: the node and the queue's partitions.
	open(t, b, base+"/", "#nodes")
	mustContain(t, "nodes table", text(t, b, "#nodes"), "n1", "up", "active", "leader")
	mustContain(t, "partitions table", text(t, b, "#partitions"), "orders")
	shot(t, b, "cluster")

	// Entities: counts.
	open(t, b, base+"/console/entities", "#entities")
	row := text(t, b, `tr[data-entity="orders"]`)
	if !strings.Contains(text(t, b, `tr[data-entity="orders"] td.active`), "2") || !strings.Contains(text(t, b, `tr[data-entity="orders"] td.deadletter`), "1") {
		t.Fatalf("orders row: %q, want 2 active and 1 dead-lettered", row)
	}
	shot(t, b, "entities")

	// Messages: JSON bodies pretty-printed.
	run(t, b, chromedp.Click(chromedp.CSS(`tr[data-entity="orders"] a`)), chromedp.WaitVisible(chromedp.CSS("#messages")))
	mustContain(t, "messages", text(t, b, "#messages"), "\"order\": \"a\"", "\"order\": \"c\"")

	// Send a test message.
	run(t, b,
		chromedp.SetValue(chromedp.CSS(`#send input[name=message_id]`), "from-console"),
		chromedp.SetValue(chromedp.CSS(`#send textarea[name=body]`), `{"test":true}`),
		chromedp.Click(chromedp.CSS(`#send button`)),
		chromedp.WaitVisible(chromedp.CSS("#done")))
	mustContain(t, "after the send", text(t, b, "#done"), "sent 1 message to orders")
	if got := counts(t, ad, "orders").GetActiveMessageCount(); got != 3 {
		t.Fatalf("active messages after the test message: %d, want 3", got)
	}

	// The dead-letter sub-queue: reason and description; resubmit.
	open(t, b, base+"/console/messages?entity=orders&dlq=1", "#messages")
	mustContain(t, "dead-letter sub-queue", text(t, b, "#messages"), "no such item", "item 7 is unknown", "\"order\": \"b\"")
	shot(t, b, "dead-letters")
	csrf, token := value(t, b, `#actions input[name=csrf]`), value(t, b, `#actions input[name=action]`)
	run(t, b,
		chromedp.Click(chromedp.CSS(`#messages input[name=seq]`)),
		chromedp.Click(chromedp.CSS(`#resubmit`)),
		chromedp.WaitVisible(chromedp.CSS("#done")))
	mustContain(t, "after the resubmit", text(t, b, "#done"), "resubmitted to orders 1 message")
	rt := counts(t, ad, "orders")
	if rt.GetActiveMessageCount() != 4 || rt.GetDeadLetterMessageCount() != 0 {
		t.Fatalf("after the resubmit: %d active, %d dead-lettered; want 4 and 0", rt.GetActiveMessageCount(), rt.GetDeadLetterMessageCount())
	}
	// The same form sent again acts once.
	form := url.Values{"csrf": {csrf}, "action": {token}, "entity": {"orders"}, "all": {"1"}}
	resp, err := http.PostForm(base+"/console/deadletters/resubmit", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rt := counts(t, ad, "orders"); rt.GetActiveMessageCount() != 4 {
		t.Fatalf("the resubmit form sent twice: %d active, want 4", rt.GetActiveMessageCount())
	}
	// A form without the session's token is refused.
	form.Set("csrf", "forged")
	form.Set("action", "another")
	resp, err = http.PostForm(base+"/console/deadletters/purge", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a forged form: %s, want 400", resp.Status)
	}

	// Create and delete a queue.
	open(t, b, base+"/console/entities", "#create-queue")
	run(t, b,
		chromedp.SetValue(chromedp.CSS(`#create-queue input[name=name]`), "scratch"),
		chromedp.Click(chromedp.CSS(`#create-queue button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-entity="scratch"]`)),
		acceptConfirms(),
		chromedp.Click(chromedp.CSS(`tr[data-entity="scratch"] button.danger`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-entity="scratch"]`)))
	if _, err := ad.GetQueue(ctx, "scratch"); err == nil {
		t.Fatal("the queue deleted in the console still exists")
	}

	// A topic and a subscription, created and deleted.
	sub := `tr[data-entity="events/subscriptions/audit"]`
	run(t, b,
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), "events"),
		chromedp.Click(chromedp.CSS(`#create-topic button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-entity="events"]`)),
		chromedp.SetValue(chromedp.CSS(`#create-subscription input[name=name]`), "audit"),
		chromedp.Click(chromedp.CSS(`#create-subscription button`)),
		chromedp.WaitVisible(chromedp.CSS(sub)))
	if _, err := ad.GetSubscription(ctx, "events", "audit"); err != nil {
		t.Fatalf("the subscription created in the console: %v", err)
	}
	run(t, b, acceptConfirms(),
		chromedp.Click(chromedp.CSS(sub+` button.danger`)),
		chromedp.WaitNotPresent(chromedp.CSS(sub)),
		acceptConfirms(),
		chromedp.Click(chromedp.CSS(`tr[data-entity="events"] button.danger`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-entity="events"]`)))
	if _, err := ad.GetTopic(ctx, "events"); err == nil {
		t.Fatal("the topic deleted in the console still exists")
	}

	// A queue's settings, updated.
	open(t, b, base+"/console/messages?entity=orders", "#settings")
	run(t, b,
		chromedp.SetValue(chromedp.CSS(`#settings input[name=max_delivery_count]`), "5"),
		chromedp.Click(chromedp.CSS(`#settings button`)),
		chromedp.WaitVisible(chromedp.CSS("#done")))
	if q, err := ad.GetQueue(ctx, "orders"); err != nil || q.GetMaxDeliveryCount() != 5 || q.GetPartitionCount() != 2 {
		t.Fatalf("after the settings were saved: %v, %v; want 5 deliveries and the 2 partitions kept", q, err)
	}
}

func TestConsoleSignsInWithAKeyAndIsHeldToItsRights(t *testing.T) {
	c := procs.StartWith(t, raftbusd, 1, procs.Options{TLS: true, Auth: true})
	await.Until(t, 30*time.Second, "the root access key", func() bool { return c.RootConnectionString() != "" })
	root, err := client.NewClientFromConnectionString(c.RootConnectionString(), &client.ClientOptions{TLSConfig: c.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx := context.Background()
	if _, err := admin.NewFromClient(root).CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	resp, err := raftbusv1.NewAccessServiceClient(root.AdminConn()).CreateAccessPolicy(ctx, &raftbusv1.CreateAccessPolicyRequest{Policy: &raftbusv1.AccessPolicy{
		Name: "reader", EntityPath: "orders", Rights: []raftbusv1.AccessRight{raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN},
	}})
	if err != nil {
		t.Fatal(err)
	}
	reader := "Endpoint=sb://" + c.Nodes[0].Addr + "/;SharedAccessKeyName=reader;SharedAccessKey=" + resp.GetPolicy().GetPrimaryKey() + ";EntityPath=orders"

	b := browser(t)
	base := "http://" + c.Nodes[0].HTTPAddr
	// Not signed in: the sign-in page, and a wrong key is told so.
	open(t, b, base+"/console/entities", "#signin")
	run(t, b,
		chromedp.SetValue(chromedp.CSS(`#signin input[name=connection_string]`), "Endpoint=sb://x/;SharedAccessKeyName=reader;SharedAccessKey=d3Jvbmc=;EntityPath=orders"),
		chromedp.Click(chromedp.CSS(`#signin button`)), chromedp.WaitVisible(chromedp.CSS("#error")))
	mustContain(t, "a wrong key", text(t, b, "#error"), "signature")

	// A key that may only listen on orders: its messages, not the cluster.
	run(t, b, chromedp.SetValue(chromedp.CSS(`#signin input[name=connection_string]`), reader),
		chromedp.Click(chromedp.CSS(`#signin button`)), chromedp.WaitVisible(chromedp.CSS("#messages")))
	mustContain(t, "the header", text(t, b, "header"), "key reader")
	open(t, b, base+"/console/", "#error")
	mustContain(t, "the cluster page with a key for one queue", text(t, b, "#error"), "UNAUTHORIZED", "not the namespace")
	open(t, b, base+"/console/messages?entity=orders", "#messages")
	// Sending needs Send: the console shows the cluster's refusal.
	run(t, b, chromedp.Click(chromedp.CSS(`#send button`)), chromedp.WaitVisible(chromedp.CSS("#error")))
	mustContain(t, "a send with a listen key", text(t, b, "#error"), "send")
	if rt, err := admin.NewFromClient(root).GetQueueRuntimeProperties(ctx, "orders"); err != nil || rt.GetActiveMessageCount() != 0 {
		t.Fatalf("after a refused send: %v, %v", rt, err)
	}
	// Signed out, the key is forgotten.
	open(t, b, base+"/console/messages?entity=orders", ".signout")
	run(t, b, chromedp.Click(chromedp.CSS(`.signout button`)), chromedp.WaitVisible(chromedp.CSS("#signin")))
	open(t, b, base+"/console/messages?entity=orders", "#signin")
}

func ptr[T any](v T) *T { return &v }
