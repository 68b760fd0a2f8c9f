package test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// The curl examples of docs/management-api.md do what the page says
// against a node without access policies: each ```sh block runs with
// sh -e (curl -f fails it on any error status), the node's management
// address in place of 127.0.0.1:5300, and leaves the entities it made.
func TestTheManagementPageCurlExamplesWork(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is needed: %v", err)
	}
	c := procs.Start(t, raftbusd, 1)
	ran := 0
	var out strings.Builder
	for _, b := range readmeBlocks(t, "../docs/management-api.md") {
		if b.info != "sh" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		script := strings.ReplaceAll(b.text, "127.0.0.1:5300", c.Nodes[0].ManagementAddr)
		got, err := exec.CommandContext(ctx, "sh", "-e", "-c", script).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("the block at line %d failed: %v\n%s", b.line, err, got)
		}
		out.Write(got)
		ran++
	}
	if ran == 0 {
		t.Fatal("docs/management-api.md has no sh block")
	}
	for _, want := range []string{"<QueueDescription", "<MaxDeliveryCount>5</MaxDeliveryCount>", "<MaxDeliveryCount>8</MaxDeliveryCount>",
		"<SubscriptionDescription", `<Filter i:type="SqlFilter"><SqlExpression>region = 'eu'</SqlExpression>`, "<feed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the examples printed no %s:\n%s", want, out.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := raftbusv1.NewAdminServiceClient(c.Conn(0))
	rule, err := admin.GetRule(ctx, &raftbusv1.GetRuleRequest{TopicName: "events", SubscriptionName: "eu", RuleName: "eu-only"})
	if err != nil || rule.GetRule().GetFilter().GetSqlFilter().GetSqlExpression() != "region = 'eu'" {
		t.Fatalf("the rule is %v (%v)", rule, err)
	}
	if _, err := admin.GetQueue(ctx, &raftbusv1.GetQueueRequest{Name: "orders"}); err == nil {
		t.Fatal("the queue the examples delete is still there")
	}
}
