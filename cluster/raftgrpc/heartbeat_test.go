package raftgrpc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

// heartbeatPair starts a leader node and a follower node with groups
// g0..g(n-1) on both; the follower's groups answer heartbeats with their
// term. unary counts the unary AppendEntries calls the follower served.
func heartbeatPair(t *testing.T, n int, register func(*Mux, *grpc.Server)) (leader, follower []*GroupTransport, leaderNode *testNode, unary *atomic.Int64) {
	t.Helper()
	unary = new(atomic.Int64)
	count := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/AppendEntries") {
			unary.Add(1)
		}
		return handler(ctx, req)
	})
	leaderNode = startNode(t, Config{})
	followerNode := startNodeWith(t, "127.0.0.1:0", Config{}, register, count)
	for i := range n {
		group := fmt.Sprintf("g%d", i)
		leader = append(leader, leaderNode.openTransport(t, group))
		f := followerNode.openTransport(t, group)
		term := uint64(10 + i)
		f.SetHeartbeatHandler(func(rpc raft.RPC) {
			rpc.Respond(&raft.AppendEntriesResponse{Term: term, Success: true}, nil)
		})
		follower = append(follower, f)
	}
	return leader, follower, leaderNode, unary
}

func sendHeartbeat(from, to *GroupTransport, term uint64) (raft.AppendEntriesResponse, error) {
	req := &raft.AppendEntriesRequest{RPCHeader: header("leader", from.LocalAddr()), Term: term, Leader: []byte(from.LocalAddr())}
	var resp raft.AppendEntriesResponse
	err := from.AppendEntries("follower", to.LocalAddr(), req, &resp)
	return resp, err
}

func TestHeartbeatsOfEveryGroupShareOneStream(t *testing.T) {
	leader, follower, leaderNode, unary := heartbeatPair(t, 8, func(m *Mux, s *grpc.Server) { m.Register(s) })
	var wg sync.WaitGroup
	for i := range leader {
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := sendHeartbeat(leader[i], follower[i], uint64(10+i))
				if err != nil || !resp.Success || resp.Term != uint64(10+i) {
					t.Errorf("heartbeat of g%d: %+v, %v", i, resp, err)
				}
			}()
		}
	}
	wg.Wait()
	if n := leaderNode.mux.heartbeatStreams.Load(); n != 1 {
		t.Errorf("%d heartbeat streams opened, want 1", n)
	}
	if n := unary.Load(); n != 0 {
		t.Errorf("%d heartbeats went as unary calls", n)
	}
}

func TestAHeartbeatToAGroupNotRunningFailsAlone(t *testing.T) {
	leader, follower, _, _ := heartbeatPair(t, 2, func(m *Mux, s *grpc.Server) { m.Register(s) })
	follower[1].SetHeartbeatHandler(nil) // raft not started yet
	if _, err := sendHeartbeat(leader[1], follower[1], 11); err == nil || !strings.Contains(err.Error(), "not running yet") {
		t.Fatalf("heartbeat to a group without raft: %v, want it refused", err)
	}
	follower[1].Close()
	if _, err := sendHeartbeat(leader[1], follower[1], 11); err == nil || !strings.Contains(err.Error(), "does not run") {
		t.Fatalf("heartbeat to a closed group: %v, want it refused", err)
	}
	if resp, err := sendHeartbeat(leader[0], follower[0], 10); err != nil || !resp.Success {
		t.Fatalf("heartbeat of another group on the same stream: %+v, %v", resp, err)
	}
}

// withoutHeartbeats is a peer of an older version: no heartbeat stream.
type withoutHeartbeats struct{ *transportServer }

func (withoutHeartbeats) Heartbeats(grpc.BidiStreamingServer[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) error {
	return status.Error(codes.Unimplemented, "unknown method Heartbeats")
}

func TestHeartbeatsGoUnaryToAPeerWithoutTheStream(t *testing.T) {
	leader, follower, leaderNode, unary := heartbeatPair(t, 2, func(m *Mux, s *grpc.Server) {
		raftv1.RegisterRaftTransportServiceServer(s, withoutHeartbeats{&transportServer{mux: m}})
	})
	for range 3 {
		for i := range leader {
			if resp, err := sendHeartbeat(leader[i], follower[i], uint64(10+i)); err != nil || resp.Term != uint64(10+i) {
				t.Fatalf("heartbeat of g%d: %+v, %v", i, resp, err)
			}
		}
	}
	if n := unary.Load(); n != 6 {
		t.Errorf("%d unary heartbeats, want 6", n)
	}
	if n := leaderNode.mux.heartbeatStreams.Load(); n != 1 {
		t.Errorf("%d heartbeat streams tried, want 1 (then unary for good)", n)
	}
}

// concurrentHeartbeats sends one heartbeat from each leader group to its
// follower, all at once, and fails the test unless each is answered with
// its group's term.
func concurrentHeartbeats(t *testing.T, leader, follower []*GroupTransport) {
	t.Helper()
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for i := range leader {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			if resp, err := sendHeartbeat(leader[i], follower[i], uint64(10+i)); err != nil || !resp.Success || resp.Term != uint64(10+i) {
				t.Errorf("heartbeat of g%d: %+v, %v", i, resp, err)
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

func TestHeartbeatsOfManyGroupsShareAMessage(t *testing.T) {
	var followerMux *Mux
	leader, follower, _, _ := heartbeatPair(t, 8, func(m *Mux, s *grpc.Server) { followerMux = m; m.Register(s) })
	// The first answer's header says the follower reads several
	// heartbeats in one message.
	if _, err := sendHeartbeat(leader[0], follower[0], 10); err != nil {
		t.Fatal(err)
	}
	before := followerMux.heartbeatMessages.Load()
	concurrentHeartbeats(t, leader, follower)
	if n := followerMux.heartbeatMessages.Load() - before; n > 2 {
		t.Fatalf("8 heartbeats sent at once to one peer came in %d messages, want them gathered (at most 2)", n)
	}
}

// olderHeartbeats serves the heartbeat stream as a peer of an older
// version: one heartbeat a message, no header, and more not read.
type olderHeartbeats struct{ *transportServer }

func (s olderHeartbeats) Heartbeats(stream grpc.BidiStreamingServer[raftv1.HeartbeatsRequest, raftv1.HeartbeatsResponse]) error {
	var sendMu sync.Mutex
	for {
		msg, err := stream.Recv()
		if err != nil {
			return nil
		}
		s.mux.heartbeatMessages.Add(1)
		go func() {
			a := s.heartbeat(stream.Context(), msg.GetRequest())
			a.Id = msg.GetId()
			sendMu.Lock()
			defer sendMu.Unlock()
			stream.Send(a)
		}()
	}
}

func TestHeartbeatsGoOneAMessageToAnOlderPeer(t *testing.T) {
	var followerMux *Mux
	leader, follower, _, _ := heartbeatPair(t, 8, func(m *Mux, s *grpc.Server) {
		followerMux = m
		raftv1.RegisterRaftTransportServiceServer(s, olderHeartbeats{&transportServer{mux: m}})
	})
	if _, err := sendHeartbeat(leader[0], follower[0], 10); err != nil {
		t.Fatal(err)
	}
	// Gathered, seven of them would never be answered.
	concurrentHeartbeats(t, leader, follower)
	if n := followerMux.heartbeatMessages.Load(); n != 9 {
		t.Fatalf("%d heartbeat messages, want 9: one heartbeat each", n)
	}
}
