package cluster

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/raftbus/raftbus/internal/await"
)

// freeLoopbackAddr is a loopback address nothing listens on (another
// process could take it first; then the test fails saying so).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The health service says NOT_SERVING while the node cannot serve (its
// metadata group has no quorum yet), SERVING once it is ready, and
// NOT_SERVING again as soon as a graceful shutdown begins.
func TestHealthServesOnlyWhileTheNodeIsReady(t *testing.T) {
	dir := t.TempDir()
	peers := map[string]string{"n1": freeLoopbackAddr(t), "n2": freeLoopbackAddr(t), "n3": freeLoopbackAddr(t)}
	start := func(id string) *Node {
		nd, err := Start(Config{NodeID: id, ListenAddr: peers[id], DataDir: filepath.Join(dir, id), Peers: peers})
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		t.Cleanup(func() { closeWithin(t, nd, closeBound) })
		return nd
	}
	// n1 alone of three: no metadata leader is possible.
	n1 := start("n1")
	conn, err := grpc.NewClient(n1.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, service := range []string{"", "raftbus.v1.MessagingService"} {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("check %q before the node is ready: %v, %v; want NOT_SERVING", service, resp, err)
		}
	}
	if n1.Ready() == nil {
		t.Fatal("a node without a metadata leader says it is ready")
	}
	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch health: %v", err)
		}
		return resp.GetStatus()
	}
	if st := next(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("first status %v, want NOT_SERVING", st)
	}

	start("n2") // a quorum: the node becomes ready
	if st := next(); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("once a quorum is up: %v, want SERVING", st)
	}
	if err := n1.Ready(); err != nil {
		t.Fatalf("health SERVING but the node is not ready: %v", err)
	}

	shutdown := make(chan error, 1)
	go func() { shutdown <- n1.Shutdown(context.Background()) }()
	if st := next(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("while shutting down: %v, want NOT_SERVING", st)
	}
	cancel() // the watch ends, so the graceful stop need not wait for it
	if err := <-shutdown; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// Server reflection lists the services and describes them, so that a
// client with no .proto (grpcurl) can call the API: this test calls
// GetClusterInfo with a message built from the descriptors reflection
// gave, as grpcurl does.
func TestReflectionListsAndDescribesTheServices(t *testing.T) {
	c := newTestCluster(t, 1)
	await.Until(t, 30*time.Second, "the node ready", func() bool { return c.nodes[0].Ready() == nil })
	conn, err := grpc.NewClient(c.nodes[0].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("reflection: %s", e.GetErrorMessage())
		}
		return resp
	}

	var services []string
	for _, s := range ask(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}).GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"raftbus.v1.AdminService", "raftbus.v1.MessagingService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(services, want) {
			t.Errorf("services %v lack %s", services, want)
		}
	}

	// The file defining the service, and the files it imports, which
	// reflection sends along (those not sent yet on this stream).
	set := &descriptorpb.FileDescriptorSet{}
	for _, b := range ask(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "raftbus.v1.AdminService"},
	}).GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, fd)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("reflection stream end: %v", err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("descriptors from reflection: %v", err)
	}
	d, err := files.FindDescriptorByName("raftbus.v1.AdminService")
	if err != nil {
		t.Fatal(err)
	}
	method := d.(protoreflect.ServiceDescriptor).Methods().ByName("GetClusterInfo")
	if method == nil {
		t.Fatal("no GetClusterInfo in the described AdminService")
	}
	in, out := dynamicpb.NewMessage(method.Input()), dynamicpb.NewMessage(method.Output())
	if err := conn.Invoke(ctx, "/raftbus.v1.AdminService/GetClusterInfo", in, out); err != nil {
		t.Fatalf("GetClusterInfo through reflection: %v", err)
	}
	if id := out.Get(method.Output().Fields().ByName("cluster_id")).String(); id == "" {
		t.Fatalf("GetClusterInfo answered %v: no cluster id", out)
	}
}
