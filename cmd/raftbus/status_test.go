package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

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
