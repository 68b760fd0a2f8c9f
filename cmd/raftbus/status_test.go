package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// oneQueueDown is an AdminService whose queue "stuck" cannot give its
// counts while "fine" can.
type oneQueueDown struct {
	raftbusv1.UnimplementedAdminServiceServer
}

func (oneQueueDown) GetClusterInfo(context.Context, *raftbusv1.GetClusterInfoRequest) (*raftbusv1.GetClusterInfoResponse, error) {
	return &raftbusv1.GetClusterInfoResponse{
		ClusterId: "c1",
		Nodes:     []*raftbusv1.NodeInfo{{NodeId: "n1", Address: "127.0.0.1:1", State: raftbusv1.NodeState_NODE_STATE_UP}},
		Partitions: []*raftbusv1.PartitionInfo{
			{EntityPath: "fine", LeaderNodeId: "n1"},
			{EntityPath: "stuck"},
		},
	}, nil
}

func (oneQueueDown) ListQueues(context.Context, *raftbusv1.ListQueuesRequest) (*raftbusv1.ListQueuesResponse, error) {
	return &raftbusv1.ListQueuesResponse{Queues: []*raftbusv1.QueueProperties{{Name: "fine"}, {Name: "stuck"}}}, nil
}

func (oneQueueDown) GetQueueRuntimeProperties(_ context.Context, req *raftbusv1.GetQueueRuntimePropertiesRequest) (*raftbusv1.GetQueueRuntimePropertiesResponse, error) {
	if req.GetName() == "stuck" {
		st, _ := status.New(codes.Internal, "partition stuck/0 cannot open").WithDetails(&raftbusv1.ErrorInfo{Message: "partition stuck/0 cannot open"})
		return nil, st.Err()
	}
	return &raftbusv1.GetQueueRuntimePropertiesResponse{Properties: &raftbusv1.RuntimeProperties{
		Partitions: []*raftbusv1.PartitionRuntimeProperties{{PartitionId: 0, ActiveMessageCount: 7}},
	}}, nil
}

func TestStatusShowsTheClusterWhenOneQueueCannotAnswer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	raftbusv1.RegisterAdminServiceServer(s, oneQueueDown{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)

	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"status", "--server", lis.Addr().String()}, strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("status exited %d: %s%s", code, out.String(), errOut.String())
	}
	text := out.String()
	if !strings.Contains(text, "n1") || !strings.Contains(text, "fine") || !strings.Contains(text, "7") {
		t.Fatalf("status hides the cluster:\n%s", text)
	}
	if !strings.Contains(text, "counts unavailable:") || !strings.Contains(text, "stuck: ") || !strings.Contains(text, "cannot open") {
		t.Fatalf("status does not say which queue could not answer:\n%s", text)
	}
}

func TestStatusRatesAreTheCountersDifferencePerSecond(t *testing.T) {
	reading := func(led uint32, sent, completed uint64) *raftbusv1.GetClusterInfoResponse {
		return &raftbusv1.GetClusterInfoResponse{Nodes: []*raftbusv1.NodeInfo{
			{NodeId: "n1", Messages: &raftbusv1.NodeMessageStats{PartitionsLed: led, Sent: sent, Completed: completed}},
			{NodeId: "n2"}, // did not answer
		}}
	}
	rates := ratesBetween(reading(2, 100, 40), reading(2, 300, 90), 2*time.Second)
	if r := rates["n1"]; r == nil || r.SentPerSecond != 100 || r.CompletedPerSecond != 25 {
		t.Fatalf("n1 rates %+v, want 100 sent/s and 25 completed/s", r)
	}
	if rates["n2"] != nil {
		t.Fatalf("a node without counters has rates: %+v", rates["n2"])
	}
	// A leadership moved between the readings: no rate rather than a
	// wrong one.
	if r := ratesBetween(reading(2, 100, 40), reading(1, 60, 50), time.Second)["n1"]; r != nil {
		t.Fatalf("rates across a leadership change: %+v", r)
	}
}
