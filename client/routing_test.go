package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Senders that start together share one routing-table request: a node
// answers one by asking every replica of every partition.
func (e *env) testConcurrentFirstSendsShareOneRouteLookup(t *testing.T) {
	e.createQueue("herd", &admin.QueueProperties{PartitionCount: proto.Uint32(4)})
	var lookups atomic.Int32
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == raftbusv1.AdminService_GetRoutingTable_FullMethodName {
			lookups.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := client.New([]string{e.cluster.Nodes[0].Addr}, &client.ClientOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSender("herd", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := s.SendMessage(ctx, &client.Message{Body: []byte{byte(i)}}, nil)
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("%d routing-table requests for 32 senders starting together, want 1", n)
	}
}
