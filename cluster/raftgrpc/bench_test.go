package raftgrpc

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

const (
	benchEntriesPerRequest = 64
	benchEntrySize         = 1024
)

func benchRequest(leader raft.ServerAddress) *raft.AppendEntriesRequest {
	entries := make([]*raft.Log, benchEntriesPerRequest)
	for i := range entries {
		entries[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: make([]byte, benchEntrySize)}
	}
	return &raft.AppendEntriesRequest{RPCHeader: header("leader", leader), Term: 1, Leader: []byte(leader), Entries: entries, LeaderCommitIndex: 1}
}

// BenchmarkAppendEntries measures replication throughput between two nodes
// on 127.0.0.1: one op is an AppendEntries of 64 entries of 1 KiB, answered
// by a follower that does no work.
func BenchmarkAppendEntries(b *testing.B) {
	setup := func(b *testing.B) (*GroupTransport, *testNode) {
		leader, follower := startNode(b, Config{}), startNode(b, Config{})
		tl, tf := leader.openTransport(b, "bench"), follower.openTransport(b, "bench")
		stop := make(chan struct{})
		done := make(chan struct{})
		b.Cleanup(func() { close(stop); <-done })
		go func() {
			defer close(done)
			resp := &raft.AppendEntriesResponse{Term: 1, Success: true}
			for {
				select {
				case rpc := <-tf.Consumer():
					rpc.Respond(resp, nil)
				case <-stop:
					return
				}
			}
		}()
		return tl, follower
	}
	report := func(b *testing.B, elapsed time.Duration) {
		b.SetBytes(benchEntriesPerRequest * benchEntrySize)
		b.ReportMetric(float64(b.N*benchEntriesPerRequest)/elapsed.Seconds(), "entries/s")
	}

	b.Run("unary", func(b *testing.B) {
		trans, follower := setup(b)
		req := benchRequest(trans.LocalAddr())
		var resp raft.AppendEntriesResponse
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := trans.AppendEntries("follower", follower.addr, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
		report(b, time.Since(start))
	})

	b.Run("pipeline", func(b *testing.B) {
		trans, follower := setup(b)
		pipeline, err := trans.AppendEntriesPipeline("follower", follower.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer pipeline.Close()
		req := benchRequest(trans.LocalAddr())
		failed := make(chan error, 1)
		drained := make(chan struct{})
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			defer close(drained)
			for i := 0; i < b.N; i++ {
				select {
				case future := <-pipeline.Consumer():
					if err := future.Error(); err != nil {
						failed <- err
						return
					}
				case <-stop:
					return
				}
			}
		}()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := pipeline.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
				b.Fatal(err)
			}
		}
		<-drained
		report(b, time.Since(start))
		select {
		case err := <-failed:
			b.Fatal(err)
		default:
		}
	})
}
