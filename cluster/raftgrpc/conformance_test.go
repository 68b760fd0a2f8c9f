package raftgrpc

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// transportFactory makes transports for the conformance suite.
type transportFactory struct {
	name string
	// newTransports returns n transports that reach each other by their
	// LocalAddr; closing them is registered on t.
	newTransports func(t *testing.T, n int) []raft.Transport
	// heartbeatFastPath says whether heartbeats go to the heartbeat handler
	// (raft's InmemTransport queues them on Consumer instead).
	heartbeatFastPath bool
}

func inmemFactory() transportFactory {
	return transportFactory{
		name: "inmem",
		newTransports: func(t *testing.T, n int) []raft.Transport {
			all := make([]*raft.InmemTransport, n)
			out := make([]raft.Transport, n)
			for i := range all {
				_, all[i] = raft.NewInmemTransport("")
				out[i] = all[i]
				trans := all[i]
				t.Cleanup(func() { _ = trans.Close() })
			}
			for _, a := range all {
				for _, b := range all {
					if a != b {
						a.Connect(b.LocalAddr(), b)
					}
				}
			}
			return out
		},
	}
}

func grpcFactory() transportFactory {
	return transportFactory{
		name: "grpc",
		newTransports: func(t *testing.T, n int) []raft.Transport {
			out := make([]raft.Transport, n)
			for i := range out {
				out[i] = startNode(t, Config{}).openTransport(t, "orders/3")
			}
			return out
		},
		heartbeatFastPath: true,
	}
}

func TestTransportConformance(t *testing.T) {
	for _, factory := range []transportFactory{inmemFactory(), grpcFactory()} {
		t.Run(factory.name, func(t *testing.T) { runTransportConformance(t, factory) })
	}
}

// runTransportConformance checks the behaviour raft expects of any
// raft.Transport, after hashicorp/raft's transport_test.go.
func runTransportConformance(t *testing.T, f transportFactory) {
	t.Run("StartStop", func(t *testing.T) {
		trans := f.newTransports(t, 1)[0]
		closer, ok := trans.(raft.WithClose)
		if !ok {
			t.Fatalf("%T does not implement raft.WithClose", trans)
		}
		if err := closer.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if err := closer.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	})

	t.Run("AppendEntries", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		args := sampleAppendEntries(trans[1].LocalAddr())
		want := raft.AppendEntriesResponse{RPCHeader: header("node-0", trans[0].LocalAddr()), Term: 4, LastLog: 90, Success: true, NoRetryBackoff: true}
		answerOne(t, trans[0], func(rpc raft.RPC) {
			if got := rpc.Command.(*raft.AppendEntriesRequest); !reflect.DeepEqual(got, args) {
				t.Errorf("request arrived as\n%#v\nwant\n%#v", got, args)
			}
			rpc.Respond(&want, nil)
		})
		var got raft.AppendEntriesResponse
		if err := trans[1].AppendEntries("node-0", trans[0].LocalAddr(), args, &got); err != nil {
			t.Fatalf("append entries: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("response %#v, want %#v", got, want)
		}
	})

	t.Run("AppendEntriesPipeline", func(t *testing.T) {
		const requests = 300 // more than any transport's bound on requests in flight
		trans := f.newTransports(t, 2)
		go func() { // the follower answers LastLog = PrevLogEntry + 1
			for i := 0; i < requests; i++ {
				select {
				case rpc := <-trans[0].Consumer():
					req := rpc.Command.(*raft.AppendEntriesRequest)
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + 1, Success: true}, nil)
				case <-time.After(5 * time.Second):
					t.Errorf("request %d never arrived", i)
					return
				}
			}
		}()
		pipeline, err := trans[1].AppendEntriesPipeline("node-0", trans[0].LocalAddr())
		if err != nil {
			t.Fatalf("open pipeline: %v", err)
		}
		defer pipeline.Close()

		checked := make(chan error, 1)
		go func() { // futures must complete in request order
			for i := 0; i < requests; i++ {
				select {
				case future := <-pipeline.Consumer():
					if err := future.Error(); err != nil {
						checked <- err
						return
					}
					if got, want := future.Response().LastLog, uint64(i)+1; got != want || future.Request().PrevLogEntry != uint64(i) {
						checked <- errors.New("futures out of order")
						return
					}
				case <-time.After(5 * time.Second):
					checked <- errors.New("timed out waiting for a future")
					return
				}
			}
			checked <- nil
		}()
		for i := 0; i < requests; i++ {
			args := sampleAppendEntries(trans[1].LocalAddr())
			args.PrevLogEntry = uint64(i)
			if _, err := pipeline.AppendEntries(args, new(raft.AppendEntriesResponse)); err != nil {
				t.Fatalf("pipeline append entries %d: %v", i, err)
			}
		}
		if err := <-checked; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RequestVote", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		candidate := trans[1].LocalAddr()
		args := &raft.RequestVoteRequest{RPCHeader: header("node-1", candidate), Term: 20, Candidate: []byte(candidate), LastLogIndex: 100, LastLogTerm: 19, LeadershipTransfer: true}
		want := raft.RequestVoteResponse{RPCHeader: header("node-0", trans[0].LocalAddr()), Term: 100, Granted: true}
		answerOne(t, trans[0], func(rpc raft.RPC) {
			if got := rpc.Command.(*raft.RequestVoteRequest); !reflect.DeepEqual(got, args) {
				t.Errorf("request arrived as %#v, want %#v", got, args)
			}
			rpc.Respond(&want, nil)
		})
		var got raft.RequestVoteResponse
		if err := trans[1].RequestVote("node-0", trans[0].LocalAddr(), args, &got); err != nil {
			t.Fatalf("request vote: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("response %#v, want %#v", got, want)
		}
	})

	t.Run("RequestPreVote", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		preVoter, ok := trans[1].(raft.WithPreVote)
		if !ok {
			t.Fatalf("%T does not implement raft.WithPreVote", trans[1])
		}
		args := &raft.RequestPreVoteRequest{RPCHeader: header("node-1", trans[1].LocalAddr()), Term: 21, LastLogIndex: 100, LastLogTerm: 19}
		want := raft.RequestPreVoteResponse{RPCHeader: header("node-0", trans[0].LocalAddr()), Term: 20, Granted: true}
		answerOne(t, trans[0], func(rpc raft.RPC) {
			if got := rpc.Command.(*raft.RequestPreVoteRequest); !reflect.DeepEqual(got, args) {
				t.Errorf("request arrived as %#v, want %#v", got, args)
			}
			rpc.Respond(&want, nil)
		})
		var got raft.RequestPreVoteResponse
		if err := preVoter.RequestPreVote("node-0", trans[0].LocalAddr(), args, &got); err != nil {
			t.Fatalf("request pre-vote: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("response %#v, want %#v", got, want)
		}
	})

	t.Run("TimeoutNow", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		args := &raft.TimeoutNowRequest{RPCHeader: header("node-1", trans[1].LocalAddr())}
		want := raft.TimeoutNowResponse{RPCHeader: header("node-0", trans[0].LocalAddr())}
		answerOne(t, trans[0], func(rpc raft.RPC) {
			if got := rpc.Command.(*raft.TimeoutNowRequest); !reflect.DeepEqual(got, args) {
				t.Errorf("request arrived as %#v, want %#v", got, args)
			}
			rpc.Respond(&want, nil)
		})
		var got raft.TimeoutNowResponse
		if err := trans[1].TimeoutNow("node-0", trans[0].LocalAddr(), args, &got); err != nil {
			t.Fatalf("timeout now: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("response %#v, want %#v", got, want)
		}
	})

	t.Run("InstallSnapshot", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		snapshot := make([]byte, 4*snapshotChunkSize+12345) // several chunks and a short one
		if _, err := rand.Read(snapshot); err != nil {
			t.Fatal(err)
		}
		leader := trans[1].LocalAddr()
		args := &raft.InstallSnapshotRequest{
			RPCHeader: header("node-1", leader), SnapshotVersion: raft.SnapshotVersionMax,
			Term: 10, Leader: []byte(leader), LastLogIndex: 100, LastLogTerm: 9,
			Configuration: []byte("configuration"), ConfigurationIndex: 80, Size: int64(len(snapshot)),
		}
		want := raft.InstallSnapshotResponse{RPCHeader: header("node-0", trans[0].LocalAddr()), Term: 10, Success: true}
		answerOne(t, trans[0], func(rpc raft.RPC) {
			if got := rpc.Command.(*raft.InstallSnapshotRequest); !reflect.DeepEqual(got, args) {
				t.Errorf("request arrived as %#v, want %#v", got, args)
			}
			data, err := io.ReadAll(rpc.Reader)
			if err != nil {
				t.Errorf("read snapshot: %v", err)
			}
			if !bytes.Equal(data, snapshot) {
				t.Errorf("snapshot arrived with %d bytes, differing from the %d sent", len(data), len(snapshot))
			}
			rpc.Respond(&want, nil)
		})
		var got raft.InstallSnapshotResponse
		if err := trans[1].InstallSnapshot("node-0", trans[0].LocalAddr(), args, &got, bytes.NewReader(snapshot)); err != nil {
			t.Fatalf("install snapshot: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("response %#v, want %#v", got, want)
		}
	})

	t.Run("EncodeDecodePeer", func(t *testing.T) {
		trans := f.newTransports(t, 1)[0]
		addr := raft.ServerAddress("10.0.0.7:7400")
		if got := trans.DecodePeer(trans.EncodePeer("node-7", addr)); got != addr {
			t.Fatalf("decoded %q, want %q", got, addr)
		}
	})

	t.Run("HeartbeatFastPath", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		leader := trans[1].LocalAddr()
		heartbeat := &raft.AppendEntriesRequest{RPCHeader: header("node-1", leader), Term: 10, Leader: []byte(leader)}
		want := raft.AppendEntriesResponse{Term: 10, Success: true}
		viaHandler := make(chan struct{}, 1)
		trans[0].SetHeartbeatHandler(func(rpc raft.RPC) {
			viaHandler <- struct{}{}
			rpc.Respond(&want, nil)
		})
		if !f.heartbeatFastPath {
			answerOne(t, trans[0], func(rpc raft.RPC) { rpc.Respond(&want, nil) })
		}
		var got raft.AppendEntriesResponse
		if err := trans[1].AppendEntries("node-0", trans[0].LocalAddr(), heartbeat, &got); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("response %#v, want %#v", got, want)
		}
		if f.heartbeatFastPath && len(viaHandler) != 1 {
			t.Fatalf("heartbeat did not go to the heartbeat handler")
		}

		// Anything more than term and leader is not a heartbeat.
		answerOne(t, trans[0], func(rpc raft.RPC) { rpc.Respond(&want, nil) })
		notHeartbeat := *heartbeat
		notHeartbeat.LeaderCommitIndex = 5
		if err := trans[1].AppendEntries("node-0", trans[0].LocalAddr(), &notHeartbeat, &got); err != nil {
			t.Fatalf("append entries: %v", err)
		}
		if len(viaHandler) > 1 {
			t.Fatalf("a request with a commit index went to the heartbeat handler")
		}
	})

	t.Run("HandlerErrorIsReturned", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		answerOne(t, trans[0], func(rpc raft.RPC) { rpc.Respond(nil, errors.New("unknown rpc")) })
		var got raft.RequestVoteResponse
		args := &raft.RequestVoteRequest{RPCHeader: header("node-1", trans[1].LocalAddr()), Term: 1}
		err := trans[1].RequestVote("node-0", trans[0].LocalAddr(), args, &got)
		if err == nil {
			t.Fatalf("request vote succeeded though the handler failed")
		}
	})

	t.Run("PipelineHandlerErrorFailsFuture", func(t *testing.T) {
		trans := f.newTransports(t, 2)
		answerOne(t, trans[0], func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{}, errors.New("disk full")) })
		pipeline, err := trans[1].AppendEntriesPipeline("node-0", trans[0].LocalAddr())
		if err != nil {
			t.Fatalf("open pipeline: %v", err)
		}
		defer pipeline.Close()
		if _, err := pipeline.AppendEntries(sampleAppendEntries(trans[1].LocalAddr()), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("pipeline append entries: %v", err)
		}
		select {
		case future := <-pipeline.Consumer():
			if future.Error() == nil {
				t.Fatalf("future succeeded though the handler failed")
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("timed out waiting for the future")
		}
	})
}

// answerOne serves one RPC arriving on trans with answer, in a goroutine the
// test waits for.
func answerOne(t *testing.T, trans raft.Transport, answer func(raft.RPC)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(wg.Wait)
	go func() {
		defer wg.Done()
		select {
		case rpc := <-trans.Consumer():
			answer(rpc)
		case <-time.After(5 * time.Second):
			t.Errorf("no RPC arrived")
		}
	}()
}

func header(id string, addr raft.ServerAddress) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)}
}

// sampleAppendEntries is a request as raft's leader sends it, with every
// field of a log entry set.
func sampleAppendEntries(leader raft.ServerAddress) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader:    header("node-1", leader),
		Term:         10,
		Leader:       []byte(leader),
		PrevLogEntry: 100,
		PrevLogTerm:  4,
		Entries: []*raft.Log{
			{Index: 101, Term: 4, Type: raft.LogNoop},
			{Index: 102, Term: 10, Type: raft.LogCommand, Data: []byte("send orders"), Extensions: []byte("ext"), AppendedAt: time.Unix(0, 1_700_000_000_123_456_789)},
			{Index: 103, Term: 10, Type: raft.LogConfiguration, Data: []byte("config")},
		},
		LeaderCommitIndex: 90,
	}
}
