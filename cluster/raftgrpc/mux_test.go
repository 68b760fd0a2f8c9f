package raftgrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/internal/await"
	raftv1 "github.com/raftbus/raftbus/proto/raftbus/raft/v1"
)

func TestLogTypeNumbering(t *testing.T) {
	want := map[raft.LogType]raftv1.LogType{
		raft.LogCommand:              raftv1.LogType_LOG_TYPE_COMMAND_UNSPECIFIED,
		raft.LogNoop:                 raftv1.LogType_LOG_TYPE_NOOP,
		raft.LogAddPeerDeprecated:    raftv1.LogType_LOG_TYPE_ADD_PEER_DEPRECATED,
		raft.LogRemovePeerDeprecated: raftv1.LogType_LOG_TYPE_REMOVE_PEER_DEPRECATED,
		raft.LogBarrier:              raftv1.LogType_LOG_TYPE_BARRIER,
		raft.LogConfiguration:        raftv1.LogType_LOG_TYPE_CONFIGURATION,
	}
	for raftType, protoType := range want {
		if got := logTypeToProto(raftType); got != protoType {
			t.Errorf("log type %v goes on the wire as %v, want %v", raftType, got, protoType)
		}
		if got := logTypeFromProto(protoType); got != raftType {
			t.Errorf("wire log type %v arrives as %v, want %v", protoType, got, raftType)
		}
	}
}

// answerAll answers every RPC arriving on trans with success until the test
// ends.
func answerAll(t *testing.T, trans raft.Transport) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case rpc := <-trans.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-stop:
				return
			}
		}
	}()
}

func TestGroupsBetweenTwoNodesShareOneConnection(t *testing.T) {
	a, b := startNode(t, Config{}), startNode(t, Config{})
	for _, group := range []string{"meta", "orders/0", "orders/1"} {
		ta, tb := a.openTransport(t, group), b.openTransport(t, group)
		answerAll(t, ta)
		answerAll(t, tb)
		var resp raft.AppendEntriesResponse
		if err := ta.AppendEntries("b", b.addr, sampleAppendEntries(a.addr), &resp); err != nil {
			t.Fatalf("group %s: a to b: %v", group, err)
		}
		if err := tb.AppendEntries("a", a.addr, sampleAppendEntries(b.addr), &resp); err != nil {
			t.Fatalf("group %s: b to a: %v", group, err)
		}
		pipeline, err := ta.AppendEntriesPipeline("b", b.addr)
		if err != nil {
			t.Fatalf("group %s: open pipeline: %v", group, err)
		}
		if _, err := pipeline.AppendEntries(sampleAppendEntries(a.addr), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("group %s: pipeline: %v", group, err)
		}
		if err := (<-pipeline.Consumer()).Error(); err != nil {
			t.Fatalf("group %s: pipeline future: %v", group, err)
		}
		pipeline.Close()
	}
	for _, n := range []*testNode{a, b} {
		if dials := n.mux.dials.Load(); dials != 1 {
			t.Errorf("node %s dialled %d connections for one peer, want 1", n.addr, dials)
		}
	}
}

func TestRequestForUnknownGroupFailsWithNotFound(t *testing.T) {
	a, b := startNode(t, Config{}), startNode(t, Config{})
	ta := a.openTransport(t, "orders/7")
	var resp raft.RequestVoteResponse
	err := ta.RequestVote("b", b.addr, &raft.RequestVoteRequest{Term: 1}, &resp)
	if got := status.Code(err); got != codes.NotFound {
		t.Fatalf("request vote for a group b does not run: code %v (%v), want NotFound", got, err)
	}
	if !strings.Contains(err.Error(), "group orders/7") {
		t.Errorf("error %q does not name the group", err)
	}
}

func TestClosingGroupTransportUnregistersIt(t *testing.T) {
	a, b := startNode(t, Config{}), startNode(t, Config{})
	tb, err := b.mux.Transport("meta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.mux.Transport("meta"); err == nil {
		t.Fatalf("a second transport for an open group was allowed")
	}
	tb.Close()
	ta := a.openTransport(t, "meta")
	var resp raft.TimeoutNowResponse
	if err := ta.TimeoutNow("b", b.addr, &raft.TimeoutNowRequest{}, &resp); status.Code(err) != codes.NotFound {
		t.Fatalf("request to a closed group: %v, want NotFound", err)
	}
	reopened := b.openTransport(t, "meta")
	answerOne(t, reopened, func(rpc raft.RPC) { rpc.Respond(&raft.TimeoutNowResponse{}, nil) })
	if err := ta.TimeoutNow("b", b.addr, &raft.TimeoutNowRequest{}, &resp); err != nil {
		t.Fatalf("request to the reopened group: %v", err)
	}
}

func TestRPCTimesOutWhenRaftDoesNotAnswer(t *testing.T) {
	a, b := startNode(t, Config{Timeout: 200 * time.Millisecond}), startNode(t, Config{})
	ta := a.openTransport(t, "meta")
	b.openTransport(t, "meta") // nobody reads its Consumer
	start := time.Now()
	var resp raft.AppendEntriesResponse
	err := ta.AppendEntries("b", b.addr, sampleAppendEntries(a.addr), &resp)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("append entries to a silent raft: %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("timed out after %s, want about 200ms", elapsed)
	}
}

func TestCloseUnblocksRPCsInFlight(t *testing.T) {
	cases := []struct {
		name  string
		close func(caller, callee *GroupTransport)
	}{
		{"caller closes", func(caller, _ *GroupTransport) { caller.Close() }},
		{"callee closes", func(_, callee *GroupTransport) { callee.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := startNode(t, Config{}), startNode(t, Config{})
			caller, callee := a.openTransport(t, "meta"), b.openTransport(t, "meta")
			returned := make(chan error, 1)
			go func() {
				var resp raft.RequestVoteResponse
				returned <- caller.RequestVote("b", b.addr, &raft.RequestVoteRequest{Term: 1}, &resp)
			}()
			select { // the request is with raft, which never answers
			case <-callee.Consumer():
			case <-time.After(5 * time.Second):
				t.Fatalf("request never arrived")
			}
			tc.close(caller, callee)
			select {
			case err := <-returned:
				if err == nil {
					t.Fatalf("request vote succeeded without an answer")
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("close did not unblock the request in flight")
			}
		})
	}
}

func TestPipelineBoundsRequestsInFlightAndCloseUnblocksIt(t *testing.T) {
	const maxInFlight = 4
	a, b := startNode(t, Config{MaxInFlight: maxInFlight}), startNode(t, Config{})
	ta := a.openTransport(t, "meta")
	b.openTransport(t, "meta") // nobody reads its Consumer
	pipeline, err := ta.AppendEntriesPipeline("b", b.addr)
	if err != nil {
		t.Fatalf("open pipeline: %v", err)
	}
	for i := 0; i < maxInFlight; i++ {
		if _, err := pipeline.AppendEntries(sampleAppendEntries(a.addr), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("append entries %d: %v", i, err)
		}
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := pipeline.AppendEntries(sampleAppendEntries(a.addr), new(raft.AppendEntriesResponse))
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("request beyond the bound was accepted (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	pipeline.Close()
	select {
	case err := <-blocked:
		if !errors.Is(err, raft.ErrPipelineShutdown) {
			t.Fatalf("blocked append entries returned %v, want ErrPipelineShutdown", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("close did not unblock the pipeline")
	}
}

// largeAppendEntries is a request of about size bytes.
func largeAppendEntries(leader raft.ServerAddress, size int) *raft.AppendEntriesRequest {
	req := sampleAppendEntries(leader)
	req.Entries[1].Data = make([]byte, size)
	return req
}

func TestPipelineBoundsBytesInFlight(t *testing.T) {
	const request = 1 << 20
	// Room for two requests in flight, not three.
	a, b := startNode(t, Config{MaxInFlightBytes: 5 * request / 2, MaxMessageBytes: 4 * request}), startNode(t, Config{MaxMessageBytes: 4 * request})
	ta := a.openTransport(t, "meta")
	b.openTransport(t, "meta") // nobody reads its Consumer: nothing is answered
	pipeline, err := ta.AppendEntriesPipeline("b", b.addr)
	if err != nil {
		t.Fatalf("open pipeline: %v", err)
	}
	defer pipeline.Close()
	for i := range 2 {
		if _, err := pipeline.AppendEntries(largeAppendEntries(a.addr, request), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("append entries %d: %v", i, err)
		}
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := pipeline.AppendEntries(largeAppendEntries(a.addr, request), new(raft.AppendEntriesResponse))
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("a request beyond the byte bound was sent (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	pipeline.Close()
	if err := <-blocked; !errors.Is(err, raft.ErrPipelineShutdown) {
		t.Fatalf("blocked append entries returned %v, want ErrPipelineShutdown", err)
	}

	// A request larger than the whole budget still goes, alone.
	c := startNode(t, Config{MaxInFlightBytes: request / 2, MaxMessageBytes: 4 * request})
	tc := c.openTransport(t, "meta")
	big, err := tc.AppendEntriesPipeline("b", b.addr)
	if err != nil {
		t.Fatalf("open pipeline: %v", err)
	}
	defer big.Close()
	if _, err := big.AppendEntries(largeAppendEntries(c.addr, request), new(raft.AppendEntriesResponse)); err != nil {
		t.Fatalf("a request over the budget with none in flight: %v", err)
	}
}

func TestRequestOverMaxMessageBytesFailsAtTheSender(t *testing.T) {
	a, b := startNode(t, Config{MaxMessageBytes: 1 << 20}), startNode(t, Config{})
	ta := a.openTransport(t, "meta")
	b.openTransport(t, "meta")
	err := ta.AppendEntries("b", b.addr, largeAppendEntries(a.addr, 2<<20), new(raft.AppendEntriesResponse))
	if status.Code(errors.Unwrap(err)) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("a request over MaxMessageBytes: %v, want ResourceExhausted from the sender", err)
	}
}

// gatedReader yields its first chunk, then waits for the gate before the
// rest: the receiver can only open the gate if it gets the first chunk
// before the sender has sent the whole snapshot.
type gatedReader struct {
	first, rest io.Reader
	gate        <-chan struct{}
	opened      bool
}

func (r *gatedReader) Read(p []byte) (int, error) {
	if n, err := r.first.Read(p); err != io.EOF {
		return n, err
	}
	if !r.opened {
		select {
		case <-r.gate:
			r.opened = true
		case <-time.After(5 * time.Second):
			return 0, errors.New("the receiver never read the first chunk: the snapshot is buffered")
		}
	}
	return r.rest.Read(p)
}

func TestInstallSnapshotStreamsWithoutBuffering(t *testing.T) {
	a, b := startNode(t, Config{}), startNode(t, Config{})
	ta, tb := a.openTransport(t, "meta"), b.openTransport(t, "meta")
	first := bytes.Repeat([]byte{1}, snapshotChunkSize)
	rest := bytes.Repeat([]byte{2}, 3*snapshotChunkSize)
	gate := make(chan struct{})
	answerOne(t, tb, func(rpc raft.RPC) {
		head := make([]byte, len(first))
		if _, err := io.ReadFull(rpc.Reader, head); err != nil {
			t.Errorf("read first chunk: %v", err)
		}
		close(gate)
		tail, err := io.ReadAll(rpc.Reader)
		if err != nil || !bytes.Equal(head, first) || !bytes.Equal(tail, rest) {
			t.Errorf("snapshot arrived damaged (err %v)", err)
		}
		rpc.Respond(&raft.InstallSnapshotResponse{Success: true}, nil)
	})
	args := &raft.InstallSnapshotRequest{SnapshotVersion: 1, Term: 2, Size: int64(len(first) + len(rest))}
	var resp raft.InstallSnapshotResponse
	reader := &gatedReader{first: bytes.NewReader(first), rest: bytes.NewReader(rest), gate: gate}
	if err := ta.InstallSnapshot("b", b.addr, args, &resp, reader); err != nil {
		t.Fatalf("install snapshot: %v", err)
	}
	if !resp.Success {
		t.Fatalf("install snapshot answered %#v", resp)
	}
}

func TestInstallSnapshotRefusedByRaftReturnsError(t *testing.T) {
	a, b := startNode(t, Config{}), startNode(t, Config{})
	ta, tb := a.openTransport(t, "meta"), b.openTransport(t, "meta")
	// raft fails before reading anything, e.g. when it cannot create the
	// snapshot sink; the sender must not hang on the unread data.
	answerOne(t, tb, func(rpc raft.RPC) { rpc.Respond(nil, errors.New("cannot create snapshot")) })
	data := bytes.Repeat([]byte{3}, 8*snapshotChunkSize)
	args := &raft.InstallSnapshotRequest{SnapshotVersion: 1, Term: 2, Size: int64(len(data))}
	var resp raft.InstallSnapshotResponse
	err := ta.InstallSnapshot("b", b.addr, args, &resp, bytes.NewReader(data))
	if err == nil || !strings.Contains(err.Error(), "cannot create snapshot") {
		t.Fatalf("install snapshot refused by raft: %v, want its error", err)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("traffic", func(t *testing.T) {
		a, b := startNode(t, Config{}), startNode(t, Config{})
		for _, group := range []string{"meta", "orders/0"} {
			ta, tb := a.openTransport(t, group), b.openTransport(t, group)
			answerAll(t, tb)
			var resp raft.AppendEntriesResponse
			if err := ta.AppendEntries("b", b.addr, sampleAppendEntries(a.addr), &resp); err != nil {
				t.Fatalf("append entries: %v", err)
			}
			// Left open: closing the Mux must close it.
			pipeline, err := ta.AppendEntriesPipeline("b", b.addr)
			if err != nil {
				t.Fatalf("open pipeline: %v", err)
			}
			for i := 0; i < 10; i++ {
				if _, err := pipeline.AppendEntries(sampleAppendEntries(a.addr), new(raft.AppendEntriesResponse)); err != nil {
					t.Fatalf("pipeline append entries: %v", err)
				}
			}
			// A request raft never answers is in flight at close.
			silent := a.openTransport(t, group+"/silent")
			go func() {
				var resp raft.RequestVoteResponse
				_ = ta.RequestVote("a", a.addr, &raft.RequestVoteRequest{}, &resp)
			}()
			_ = silent
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines before, %d after close:\n%s", before, runtime.NumGoroutine(), buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ExampleMux() {
	mux, err := NewMux(Config{LocalAddr: "10.0.0.1:7400"})
	if err != nil {
		panic(err)
	}
	defer mux.Close()
	// The node registers mux on its gRPC server (mux.Register(server)) and
	// gives each Raft group its own transport.
	trans, err := mux.Transport("orders/3")
	if err != nil {
		panic(err)
	}
	defer trans.Close()
	fmt.Println(trans.LocalAddr(), trans.Group())
	// Output: 10.0.0.1:7400 orders/3
}

func TestPeerRestartedOnTheSameAddressIsReachedAgain(t *testing.T) {
	a, b := startNode(t, Config{Timeout: time.Second}), startNode(t, Config{})
	ta := a.openTransport(t, "meta")
	answerAll(t, b.openTransport(t, "meta"))
	send := func() error {
		var resp raft.AppendEntriesResponse
		return ta.AppendEntries("b", b.addr, sampleAppendEntries(a.addr), &resp)
	}
	if err := send(); err != nil {
		t.Fatalf("append entries: %v", err)
	}

	b.mux.Close()
	b.server.Stop()
	await.Until(t, 5*time.Second, "requests to the stopped peer to fail", func() bool { return send() != nil })

	restarted := startNodeAt(t, string(b.addr), Config{})
	answerAll(t, restarted.openTransport(t, "meta"))
	await.Until(t, 3*time.Second, "the restarted peer to be reached", func() bool { return send() == nil })
	if dials := a.mux.dials.Load(); dials != 1 {
		t.Errorf("reaching the restarted peer took %d connections, want the one reconnecting", dials)
	}
}
