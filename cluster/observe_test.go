package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/httpapi"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// scrape serves nd's HTTP listener on loopback and reads /metrics from it
// with the Prometheus text parser.
func scrape(t *testing.T, nd *Node) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(httpapi.Handler(httpapi.Config{Metrics: nd.Metrics(), Ready: nd.Ready}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// sumOf adds up the samples of a family whose labels include want, across
// the scrapes of every node. A histogram contributes its count.
func sumOf(scrapes []map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, families := range scrapes {
		f := families[name]
		if f == nil {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// A known workload through one node of three, on a queue whose partitions
// are led by different nodes (so that some calls are forwarded), gives
// those figures in the sum of the nodes' metrics: every partition is
// counted once, by its leader, and every call once, by the node called.
func TestMetricsCountAKnownWorkload(t *testing.T) {
	c := newTestCluster(t, 3)
	for _, nd := range c.nodes {
		await.Until(t, 30*time.Second, nd.ID()+" ready", func() bool { return nd.Ready() == nil })
	}
	cl := c.client(0)
	createQueue(t, cl, &raftbusv1.QueueProperties{Name: "orders", PartitionCount: proto.Uint32(3), RequiresDuplicateDetection: proto.Bool(true)})
	// Leaders spread over the nodes (each partition has a preferred
	// one): then node 0 forwards the calls for the others.
	await.Until(t, 30*time.Second, "a partition led by another node", func() bool {
		led := 0
		metricsSource{c.nodes[0]}.EachGroup(func(g string, s partition.RaftStats) {
			if s.Leader && g != "meta" {
				led++
			}
		})
		return led < 3
	})
	for i := range 100 {
		sendOne(t, cl, "orders", fmt.Sprintf("m%d", i))
	}
	for i := range 5 {
		if r := sendOne(t, cl, "orders", fmt.Sprintf("m%d", i)); !r.GetDuplicate() {
			t.Fatalf("resend of m%d not taken for a duplicate", i)
		}
	}

	// Receive 70, complete 60 and dead-letter 10; abandon any more a
	// receive handed out.
	var got []*raftbusv1.ReceivedMessage
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 70 {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of 70", len(got))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "orders", MaxMessages: int32(min(10, 70-len(got))), MaxWait: durationpb.New(time.Second)})
		cancel()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		got = append(got, resp.GetMessages()...)
	}
	settle := func(m *raftbusv1.ReceivedMessage, call func(ctx context.Context, lock *raftbusv1.MessageLock) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := call(ctx, &raftbusv1.MessageLock{EntityPath: "orders", PartitionId: m.GetPartitionId(), LockToken: m.GetLockToken()}); err != nil {
			t.Fatalf("settle: %v", err)
		}
	}
	for i, m := range got {
		switch {
		case i < 60:
			settle(m, func(ctx context.Context, lock *raftbusv1.MessageLock) error {
				_, err := cl.msg.Complete(ctx, &raftbusv1.CompleteRequest{Lock: lock})
				return err
			})
		case i < 70:
			settle(m, func(ctx context.Context, lock *raftbusv1.MessageLock) error {
				_, err := cl.msg.DeadLetter(ctx, &raftbusv1.DeadLetterRequest{Lock: lock, Reason: "test"})
				return err
			})
		default:
			settle(m, func(ctx context.Context, lock *raftbusv1.MessageLock) error {
				_, err := cl.msg.Abandon(ctx, &raftbusv1.AbandonRequest{Lock: lock})
				return err
			})
		}
	}
	// A call that fails: counted by reason.
	if _, err := cl.msg.Send(context.Background(), &raftbusv1.SendRequest{EntityPath: "nowhere", Messages: []*raftbusv1.Message{{Body: []byte("x")}}}); reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("send to a missing queue: %v", err)
	}

	var scrapes []map[string]*dto.MetricFamily
	for _, nd := range c.nodes {
		scrapes = append(scrapes, scrape(t, nd))
	}
	q := map[string]string{"entity": "orders"}
	for name, want := range map[string]float64{
		"raftbus_messages_sent_total":          100,
		"raftbus_messages_duplicates_total":    5,
		"raftbus_messages_received_total":      float64(len(got)),
		"raftbus_messages_completed_total":     60,
		"raftbus_messages_dead_lettered_total": 10,
		"raftbus_messages_abandoned_total":     float64(len(got) - 70),
		"raftbus_messages_expired_total":       0,
	} {
		if v := sumOf(scrapes, name, q); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for state, want := range map[string]float64{"active": 30, "dead_lettered": 10, "locked": 0, "scheduled": 0, "deferred": 0} {
		if v := sumOf(scrapes, "raftbus_entity_messages", map[string]string{"entity": "orders", "state": state}); v != want {
			t.Errorf("raftbus_entity_messages{state=%q} = %v, want %v", state, v, want)
		}
	}
	if v := sumOf(scrapes, "raftbus_entity_size_bytes", q); v <= 0 {
		t.Errorf("raftbus_entity_size_bytes = %v, want the bytes of 40 messages", v)
	}
	// Every partition reported by one leader; every node ready.
	for id := range 3 {
		if v := sumOf(scrapes, "raftbus_raft_leader", map[string]string{"group": fmt.Sprintf("orders/%d", id)}); v != 1 {
			t.Errorf("leaders of orders/%d: %v, want 1", id, v)
		}
	}
	if v := sumOf(scrapes, "raftbus_node_ready", nil); v != 3 {
		t.Errorf("ready nodes: %v, want 3", v)
	}
	// Calls are counted by the node called, not by the leaders some of
	// them were forwarded to.
	for method, want := range map[string]float64{"Send": 106, "Complete": 60, "DeadLetter": 10} {
		if v := sumOf(scrapes[:1], "raftbus_request_duration_seconds", map[string]string{"method": method}); v != want {
			t.Errorf("%s calls at the node called: %v, want %v", method, v, want)
		}
		if v := sumOf(scrapes[1:], "raftbus_request_duration_seconds", map[string]string{"method": method}); v != 0 {
			t.Errorf("%s calls counted again at other nodes: %v", method, v)
		}
	}
	if v := sumOf(scrapes, "raftbus_request_errors_total", map[string]string{"method": "Send", "reason": "NOT_FOUND"}); v != 1 {
		t.Errorf("Send errors NOT_FOUND: %v, want 1", v)
	}
	for _, name := range []string{"raftbus_raft_commit_duration_seconds", "raftbus_raft_apply_duration_seconds", "raftbus_log_fsync_duration_seconds", "go_goroutines", "process_cpu_seconds_total"} {
		if v := sumOf(scrapes, name, nil); v <= 0 {
			t.Errorf("%s: %v, want some", name, v)
		}
	}
}
