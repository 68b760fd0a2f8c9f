package client_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

func (e *env) testAdmin(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	q, err := e.admin.CreateQueue(ctx, "admin-q", &admin.QueueProperties{LockDuration: durationpb.New(20 * time.Second), PartitionCount: proto.Uint32(2)})
	if err != nil || q.GetMaxDeliveryCount() != 10 || q.GetLockDuration().AsDuration() != 20*time.Second {
		t.Fatalf("create: %v, %v", q, err)
	}
	if _, err := e.admin.CreateQueue(ctx, "admin-q", nil); !errors.Is(err, client.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	q, err = e.admin.UpdateQueue(ctx, "admin-q", &admin.QueueProperties{MaxDeliveryCount: proto.Int32(4)})
	if err != nil || q.GetMaxDeliveryCount() != 4 || q.GetLockDuration().AsDuration() != 20*time.Second {
		t.Fatalf("update changed more than asked: %v, %v", q, err)
	}
	got, err := e.admin.GetQueue(ctx, "admin-q")
	if err != nil || !proto.Equal(got, q) {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := e.admin.UpdateQueue(ctx, "admin-q", &admin.QueueProperties{PartitionCount: proto.Uint32(3)}); !errors.Is(err, &client.Error{Code: client.CodeInvalidArgument}) {
		t.Fatalf("changing the partition count: %v", err)
	}
	list, err := e.admin.ListQueues(ctx)
	if err != nil || len(list) == 0 {
		t.Fatalf("list: %v, %v", list, err)
	}
	routes, err := e.admin.GetRoutingTable(ctx, "admin-q")
	if err != nil || len(routes) != 1 || len(routes[0].GetPartitions()) != 2 || routes[0].GetPartitions()[0].GetLeaderAddress() == "" {
		t.Fatalf("routing table: %v, %v", routes, err)
	}
	info, err := e.admin.GetClusterInfo(ctx)
	if err != nil || len(info.GetNodes()) != 1 || !info.GetNodes()[0].GetMetadataLeader() {
		t.Fatalf("cluster info: %v, %v", info, err)
	}
	if err := e.admin.DeleteQueue(ctx, "admin-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetQueueRuntimeProperties(ctx, "admin-q"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("runtime of a deleted queue: %v", err)
	}
}
