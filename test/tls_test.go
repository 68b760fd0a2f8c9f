package test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/internal/certs"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestTLSClusterServesHoldersOfItsCertificatesOnly runs three raftbusd
// processes with TLS: they form their cluster and replicate over mutual
// TLS, a client with a certificate of the cluster CA sends and receives,
// and every other caller is refused without changing anything: a plain
// TCP client, a TLS client without a certificate, one with a certificate
// of another CA, a client certificate calling the internal services, and
// a node calling them under another node's name.
func TestTLSClusterServesHoldersOfItsCertificatesOnly(t *testing.T) {
	c := procs.StartWith(t, raftbusd, 3, procs.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	good, err := client.New(c.Addrs(), &client.ClientOptions{TLSConfig: c.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	adm := admin.NewFromClient(good)
	if _, err := adm.CreateQueue(ctx, "secured", &admin.QueueProperties{PartitionCount: ptr[uint32](3)}); err != nil {
		t.Fatal(err)
	}
	s, _ := good.NewSender("secured", nil)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte(id)}, nil); err != nil {
			t.Fatalf("send with a client certificate: %v", err)
		}
	}
	active := func() int64 {
		t.Helper()
		rt, err := adm.GetQueueRuntimeProperties(ctx, "secured")
		if err != nil {
			t.Fatal(err)
		}
		return rt.GetActiveMessageCount()
	}
	if n := active(); n != 3 {
		t.Fatalf("%d messages active, want 3", n)
	}

	otherCA := filepath.Join(t.TempDir(), "other")
	if err := certs.Init(otherCA); err != nil {
		t.Fatal(err)
	}
	if err := certs.Issue(otherCA, certs.Client, "intruder", nil); err != nil {
		t.Fatal(err)
	}
	clusterCA := c.CertFiles("test").CA
	noCert, err := certs.LoadClient(certs.Files{CA: clusterCA})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := certs.LoadClient(certs.Files{CA: clusterCA,
		Cert: filepath.Join(otherCA, certs.CertFile("intruder")), Key: filepath.Join(otherCA, certs.KeyFile("intruder"))})
	if err != nil {
		t.Fatal(err)
	}

	// Callers of the public API, each refused; the queue keeps its three
	// messages.
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		// unauthorized: the node answers UNAUTHORIZED; otherwise the
		// connection itself is refused.
		unauthorized bool
	}{
		{"plain TCP", insecure.NewCredentials(), false},
		{"TLS without a client certificate", credentials.NewTLS(noCert), true},
		{"a certificate of another CA", credentials.NewTLS(foreign), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, c.Nodes[0].Addr, tc.creds)
			msg := raftbusv1.NewMessagingServiceClient(conn)
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			defer ccancel()
			_, sendErr := msg.Send(cctx, &raftbusv1.SendRequest{EntityPath: "secured", Messages: []*raftbusv1.Message{{Body: []byte("x")}}})
			_, recvErr := msg.Receive(cctx, &raftbusv1.ReceiveRequest{EntityPath: "secured", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, MaxMessages: 10})
			_, delErr := raftbusv1.NewAdminServiceClient(conn).DeleteQueue(cctx, &raftbusv1.DeleteQueueRequest{Name: "secured"})
			for _, err := range []error{sendErr, recvErr, delErr} {
				if tc.unauthorized {
					if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED {
						t.Fatalf("got %v, want UNAUTHORIZED", err)
					}
				} else if err == nil || reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
					t.Fatalf("got %v, want the connection refused", err)
				}
			}
		})
	}
	if n := active(); n != 3 {
		t.Fatalf("%d messages active after the refused calls, want 3", n)
	}

	// Probes need no certificate: health answers a TLS caller without one.
	// Its status follows readiness, checked every readiness interval, which
	// a metadata entry being applied turns off for a moment: the answer is
	// awaited, and any failure to answer fails at once.
	hc := healthpb.NewHealthClient(dial(t, c.Nodes[0].Addr, credentials.NewTLS(noCert)))
	await.Until(t, 10*time.Second, "health to answer SERVING without a client certificate", func() bool {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health without a client certificate: %v", err)
		}
		return resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})

	// The internal services answer nodes only, each under its own name.
	clientConn := dial(t, c.Nodes[0].Addr, credentials.NewTLS(c.ClientTLS()))
	_, err = clusterv1.NewNodeServiceClient(clientConn).PartitionStatus(ctx, &clusterv1.PartitionStatusRequest{EntityPath: "secured"})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED {
		t.Fatalf("node service called with a client certificate: %v, want UNAUTHORIZED", err)
	}
	_, err = raftv1.NewRaftTransportServiceClient(clientConn).RequestVote(ctx, &raftv1.RequestVoteRequest{})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED {
		t.Fatalf("Raft transport called with a client certificate: %v, want UNAUTHORIZED", err)
	}
	// n1's certificate, calling as n2.
	nodeConn := dial(t, c.Nodes[1].Addr, credentials.NewTLS(c.NodeTLS()))
	posing := metadata.AppendToOutgoingContext(ctx, identity.NodeIDKey, c.Nodes[2].ID)
	_, err = raftv1.NewRaftTransportServiceClient(nodeConn).RequestVote(posing, &raftv1.RequestVoteRequest{})
	if reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED {
		t.Fatalf("a node calling under another node's name: %v, want UNAUTHORIZED", err)
	}
	if _, err := clusterv1.NewNodeServiceClient(nodeConn).PartitionStatus(ctx, &clusterv1.PartitionStatusRequest{EntityPath: "secured"}); err != nil {
		t.Fatalf("node service called with a node certificate: %v", err)
	}

	// And the cluster still serves its client, through a leader change.
	leader := leaderIndex(t, ctx, adm, c)
	c.Kill(leader)
	r, _ := good.NewReceiverForQueue("secured", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	got := map[string]bool{}
	for len(got) < 3 {
		msgs, err := r.ReceiveMessages(ctx, 10, &client.ReceiveMessagesOptions{MaxWaitTime: time.Second})
		if err != nil {
			t.Fatalf("receive after killing %s: %v", c.Nodes[leader].ID, err)
		}
		for _, m := range msgs {
			got[m.MessageID] = true
		}
	}
}

// leaderIndex is the index of the node leading the metadata group.
func leaderIndex(t *testing.T, ctx context.Context, adm *admin.Client, c *procs.Cluster) int {
	t.Helper()
	info, err := adm.GetClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.GetNodes() {
		if n.GetMetadataLeader() {
			if i := c.IndexOf(n.GetAddress()); i >= 0 {
				return i
			}
		}
	}
	t.Fatalf("no leader in %v", info)
	return -1
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func reasonOf(err error) raftbusv1.ErrorReason {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

func ptr[T any](v T) *T { return &v }
