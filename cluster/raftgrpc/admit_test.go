package raftgrpc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestAdmitSeesTheCallersMetadataOnEveryRPC: what Outgoing gives for the
// target server reaches the receiver's Admit on unary calls, pipelines
// and snapshots, and a refusal reaches the caller before raft sees the
// request.
func TestAdmitSeesTheCallersMetadataOnEveryRPC(t *testing.T) {
	var refuse atomic.Bool
	var seen atomic.Int64
	b := startNode(t, Config{Admit: func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("who"); len(got) != 1 || got[0] != "a for b" {
			return status.Errorf(codes.InvalidArgument, "metadata %v", md)
		}
		seen.Add(1)
		if refuse.Load() {
			return errors.New("refused for a test")
		}
		return nil
	}})
	a := startNode(t, Config{Outgoing: func(target raft.ServerID) metadata.MD {
		return metadata.Pairs("who", "a for "+string(target))
	}})
	ta, tb := a.openTransport(t, "g"), b.openTransport(t, "g")
	var delivered atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			var rpc raft.RPC
			select {
			case rpc = <-tb.Consumer():
			case <-stop:
				return
			}
			delivered.Add(1)
			switch rpc.Command.(type) {
			case *raft.InstallSnapshotRequest:
				rpc.Respond(&raft.InstallSnapshotResponse{Success: true}, nil)
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			default:
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			}
		}
	}()

	calls := map[string]func() error{
		"append entries": func() error {
			return ta.AppendEntries("b", b.addr, sampleAppendEntries(a.addr), new(raft.AppendEntriesResponse))
		},
		"request vote": func() error {
			return ta.RequestVote("b", b.addr, &raft.RequestVoteRequest{Term: 1}, new(raft.RequestVoteResponse))
		},
		"pipeline": func() error {
			p, err := ta.AppendEntriesPipeline("b", b.addr)
			if err != nil {
				return err
			}
			defer p.Close()
			if _, err := p.AppendEntries(sampleAppendEntries(a.addr), new(raft.AppendEntriesResponse)); err != nil {
				return err
			}
			return (<-p.Consumer()).Error()
		},
		"install snapshot": func() error {
			req := &raft.InstallSnapshotRequest{Term: 1, LastLogIndex: 5, Size: 3}
			return ta.InstallSnapshot("b", b.addr, req, new(raft.InstallSnapshotResponse), bytes.NewReader([]byte("abc")))
		},
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s admitted: %v", name, err)
		}
	}
	if seen.Load() != int64(len(calls)) || delivered.Load() != int64(len(calls)) {
		t.Fatalf("admit saw %d calls and raft %d, want %d each", seen.Load(), delivered.Load(), len(calls))
	}

	refuse.Store(true)
	for name, call := range calls {
		err := call()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "refused for a test") {
			t.Fatalf("%s refused: %v, want PERMISSION_DENIED saying why", name, err)
		}
	}
	if delivered.Load() != int64(len(calls)) {
		t.Fatalf("raft saw %d requests, %d of them refused", delivered.Load(), delivered.Load()-int64(len(calls)))
	}
}
