package cluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/internal/await"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestPartitionStatusReportsTheReplicaDigest asks every node for the digest
// of its replica, as the failover checker does once a cluster has settled:
// it comes only when asked for, and replicas at the same applied index
// report the same one, which changes when the state does.
func TestPartitionStatusReportsTheReplicaDigest(t *testing.T) {
	c := newTestCluster(t, 3)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q"})
	nodes := make([]clusterv1.NodeServiceClient, 3)
	for i := range nodes {
		conn, err := grpc.NewClient(c.nodes[i].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		nodes[i] = clusterv1.NewNodeServiceClient(conn)
	}
	status := func(i int, digest bool) *clusterv1.PartitionStatusResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := nodes[i].PartitionStatus(ctx, &clusterv1.PartitionStatusRequest{EntityPath: "q", IncludeDigest: digest})
		if err != nil {
			t.Fatalf("n%d: %v", i+1, err)
		}
		return resp
	}
	// agreed waits until the three replicas report one applied index and
	// one digest, and returns the digest.
	agreed := func() []byte {
		t.Helper()
		var last string
		var digest []byte
		await.Until(t, 20*time.Second, "replicas to agree", func() bool {
			var rs []*clusterv1.PartitionStatusResponse
			for i := range nodes {
				rs = append(rs, status(i, true))
			}
			last = fmt.Sprint(rs)
			for _, r := range rs[1:] {
				if r.GetAppliedIndex() != rs[0].GetAppliedIndex() || !bytes.Equal(r.GetDigest(), rs[0].GetDigest()) {
					return false
				}
			}
			digest = rs[0].GetDigest()
			return true
		})
		if len(digest) != 32 {
			t.Fatalf("digest of %d bytes, want 32: %s", len(digest), last)
		}
		return digest
	}

	if d := status(0, false).GetDigest(); len(d) != 0 {
		t.Fatalf("digest sent without being asked for: %x", d)
	}
	empty := agreed()
	sendOne(t, c.client(1), "q", "m1")
	if one := agreed(); bytes.Equal(one, empty) {
		t.Fatal("the digest did not change when a message was stored")
	}
}
