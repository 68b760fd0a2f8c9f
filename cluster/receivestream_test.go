package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// receiveStream opens a ReceiveStream at node i with open; the stream ends
// with ctx.
func (c *testCluster) receiveStream(ctx context.Context, i int, open *raftbusv1.ReceiveStreamOpen) raftbusv1.MessagingService_ReceiveStreamClient {
	c.t.Helper()
	s, err := c.client(i).msg.ReceiveStream(ctx)
	if err != nil {
		c.t.Fatalf("open a receive stream at n%d: %v", i+1, err)
	}
	if err := s.Send(&raftbusv1.ReceiveStreamRequest{Request: &raftbusv1.ReceiveStreamRequest_Open{Open: open}}); err != nil {
		c.t.Fatalf("send the open request: %v", err)
	}
	return s
}

// grant grants s one receive.
func grant(t *testing.T, s raftbusv1.MessagingService_ReceiveStreamClient, id string, max int32, wait time.Duration) {
	t.Helper()
	err := s.Send(&raftbusv1.ReceiveStreamRequest{Request: &raftbusv1.ReceiveStreamRequest_Credit{Credit: &raftbusv1.ReceiveCredit{
		ReceiveId: []byte(id), MaxMessages: max, MaxWait: durationpb.New(wait),
	}}})
	// io.EOF means the server has already ended the stream, which it does
	// at once for a stream opened wrong: the status is the next Recv's.
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("grant %s: %v", id, err)
	}
}

// answer reads the next response of s and checks it answers grant id.
func answer(t *testing.T, s raftbusv1.MessagingService_ReceiveStreamClient, id string) *raftbusv1.ReceiveStreamResponse {
	t.Helper()
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("the response to grant %s: %v", id, err)
	}
	if string(resp.GetReceiveId()) != id {
		t.Fatalf("a response for grant %q came where %q's was due", resp.GetReceiveId(), id)
	}
	return resp
}

// answers reads the responses of s to the grants ids, which come in the
// order they are done, and returns them by grant.
func answers(t *testing.T, s raftbusv1.MessagingService_ReceiveStreamClient, ids ...string) map[string]*raftbusv1.ReceiveStreamResponse {
	t.Helper()
	out := make(map[string]*raftbusv1.ReceiveStreamResponse)
	for range ids {
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("the responses to grants %q: %v", ids, err)
		}
		id := string(resp.GetReceiveId())
		if !slices.Contains(ids, id) || out[id] != nil {
			t.Fatalf("a response for grant %q came where those of %q were due", id, ids)
		}
		out[id] = resp
	}
	return out
}

// sendIDs sends one message per id to queue through node 0.
func (c *testCluster) sendIDs(queue string, ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		sendOne(c.t, c.client(0), queue, id)
	}
}

// messageIDs are the MessageIds of msgs, in order.
func messageIDs(msgs []*raftbusv1.ReceivedMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.GetMessage().GetMessageId())
	}
	return out
}

// peekCount is how many messages queue holds (of any state), as node 0
// sees them.
func (c *testCluster) peekCount(ctx context.Context, queue string) int {
	c.t.Helper()
	resp, err := c.client(0).msg.Peek(ctx, &raftbusv1.PeekRequest{EntityPath: queue, MaxMessages: 100})
	if err != nil {
		c.t.Fatalf("peek %s: %v", queue, err)
	}
	return len(resp.GetMessages())
}

// TestReceiveStream serves the grants of ReceiveStreams on a three-node
// cluster: at once, each answered with its receive id when it is done,
// locked or removed as the mode says, a waiting grant woken by a send,
// not holding up a grant that received, forwarded from a node that does
// not lead the partition, per-grant and per-stream errors, and a stream
// broken with a grant outstanding, whose receive a replay recovers.
func TestReceiveStream(t *testing.T) {
	c := newTestCluster(t, 3)
	// queue creates a queue and waits until its preferred leader leads
	// it (leadership moves there a moment after it is created).
	queue := func(t *testing.T, props *raftbusv1.QueueProperties) (leader, follower int) {
		createQueue(t, c.client(0), props)
		var preferred string
		await.Until(t, 10*time.Second, "n1 to know "+props.GetName(), func() bool {
			if e := c.nodes[0].meta.fsm.Entity(props.GetName()); e != nil {
				preferred = e.GetPartitions()[0].GetNodeIds()[0]
			}
			return preferred != ""
		})
		await.Until(t, 20*time.Second, "the preferred leader "+preferred+" to lead "+props.GetName(), func() bool {
			leader = c.leaderOf(props.GetName(), 0)
			return c.nodes[leader].ID() == preferred
		})
		return leader, (leader + 1) % 3
	}

	t.Run("grants are served at once, peek-locked", func(t *testing.T) {
		leader, _ := queue(t, &raftbusv1.QueueProperties{Name: "atonce"})
		c.sendIDs("atonce", "m1", "m2", "m3", "m4", "m5")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := c.receiveStream(ctx, leader, &raftbusv1.ReceiveStreamOpen{EntityPath: "atonce"})
		// All three granted before any is answered.
		grant(t, s, "a", 2, 0)
		grant(t, s, "b", 2, 0)
		grant(t, s, "c", 2, 0)
		var got []string
		for id, resp := range answers(t, s, "a", "b", "c") {
			if resp.GetError() != nil {
				t.Fatalf("grant %s failed: %v", id, resp.GetError())
			}
			for _, m := range resp.GetMessages() {
				if len(m.GetLockToken()) == 0 || m.GetLockedUntil() == nil {
					t.Fatalf("grant %s: message %s is not locked", id, m.GetMessage().GetMessageId())
				}
			}
			got = append(got, messageIDs(resp.GetMessages())...)
		}
		slices.Sort(got)
		if fmt.Sprint(got) != "[m1 m2 m3 m4 m5]" {
			t.Fatalf("grants received %v, want m1..m5, each once", got)
		}
		// Locked, not removed: they are all still there.
		if n := c.peekCount(ctx, "atonce"); n != 5 {
			t.Fatalf("%d messages left after peek-lock grants, want 5 (locked)", n)
		}
		// Every message is locked: a grant finds nothing.
		grant(t, s, "d", 1, 0)
		if resp := answer(t, s, "d"); len(resp.GetMessages()) != 0 || resp.GetError() != nil {
			t.Fatalf("grant d of a queue whose messages are all locked: %v, want nothing", resp)
		}
	})

	t.Run("a waiting grant is woken by a send, and receive-and-delete removes", func(t *testing.T) {
		leader, _ := queue(t, &raftbusv1.QueueProperties{Name: "woken"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := c.receiveStream(ctx, leader, &raftbusv1.ReceiveStreamOpen{EntityPath: "woken", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE})
		grant(t, s, "w", 10, time.Minute)
		start := time.Now()
		c.sendIDs("woken", "late")
		resp := answer(t, s, "w")
		if fmt.Sprint(messageIDs(resp.GetMessages())) != "[late]" || time.Since(start) > 20*time.Second {
			t.Fatalf("grant waiting a minute: %v after %v, want [late] as soon as it was sent", resp, time.Since(start))
		}
		if m := resp.GetMessages()[0]; len(m.GetLockToken()) != 0 {
			t.Fatalf("a message received and deleted has a lock token")
		}
		if n := c.peekCount(ctx, "woken"); n != 0 {
			t.Fatalf("%d messages left after receive-and-delete, want 0", n)
		}
	})

	t.Run("a grant that received is answered while an earlier one still waits", func(t *testing.T) {
		leader, _ := queue(t, &raftbusv1.QueueProperties{Name: "overtake"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := c.receiveStream(ctx, leader, &raftbusv1.ReceiveStreamOpen{EntityPath: "overtake"})
		grant(t, s, "early", 1, 20*time.Second)
		// A grant that does not wait is answered while the first waits.
		grant(t, s, "now", 1, 0)
		start := time.Now()
		if resp := answer(t, s, "now"); len(resp.GetMessages()) != 0 || time.Since(start) > 10*time.Second {
			t.Fatalf("a grant not waiting, behind one waiting: %v after %v, want nothing at once", resp, time.Since(start))
		}
		grant(t, s, "late", 1, 20*time.Second)
		// Both wait: one message wakes one of them, whose answer must not
		// wait, its message locked, for the other's wait to end.
		c.sendIDs("overtake", "only")
		start = time.Now()
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(messageIDs(resp.GetMessages())) != "[only]" || time.Since(start) > 10*time.Second {
			t.Fatalf("first answer after a send to two waiting grants: %v after %v, want [only] at once", resp, time.Since(start))
		}
	})

	t.Run("grants made at once wait at once", func(t *testing.T) {
		leader, _ := queue(t, &raftbusv1.QueueProperties{Name: "idle"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := c.receiveStream(ctx, leader, &raftbusv1.ReceiveStreamOpen{EntityPath: "idle"})
		const wait = 3 * time.Second
		start := time.Now()
		for _, id := range []string{"i1", "i2", "i3"} {
			grant(t, s, id, 1, wait)
		}
		for id, resp := range answers(t, s, "i1", "i2", "i3") {
			if len(resp.GetMessages()) != 0 || resp.GetError() != nil {
				t.Fatalf("grant %s of an empty queue: %v", id, resp)
			}
		}
		// One after the other they would take 3 waits.
		if took := time.Since(start); took < wait || took > 2*wait {
			t.Fatalf("three grants of %v made at once were answered after %v, want about one wait", wait, took)
		}
	})

	t.Run("a follower forwards the grants to the leader", func(t *testing.T) {
		_, follower := queue(t, &raftbusv1.QueueProperties{Name: "forwarded"})
		c.sendIDs("forwarded", "f1", "f2")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := c.receiveStream(ctx, follower, &raftbusv1.ReceiveStreamOpen{EntityPath: "forwarded", PartitionId: proto.Uint32(0)})
		grant(t, s, "x", 1, 0)
		grant(t, s, "y", 5, time.Second)
		got := answers(t, s, "x", "y")
		ids := append(messageIDs(got["x"].GetMessages()), messageIDs(got["y"].GetMessages())...)
		slices.Sort(ids)
		if fmt.Sprint(ids) != "[f1 f2]" {
			t.Fatalf("grants at a follower received %v and %v, want f1 and f2, each once", got["x"], got["y"])
		}
	})

	t.Run("errors", func(t *testing.T) {
		queue(t, &raftbusv1.QueueProperties{Name: "errs"})
		queue(t, &raftbusv1.QueueProperties{Name: "sessions", RequiresSession: proto.Bool(true)})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Stream errors end it: they are what every grant would fail with.
		for _, tc := range []struct {
			name string
			open *raftbusv1.ReceiveStreamOpen
			want raftbusv1.ErrorReason
		}{
			{"an unknown entity", &raftbusv1.ReceiveStreamOpen{EntityPath: "nosuch"}, raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND},
			{"a session entity without a session", &raftbusv1.ReceiveStreamOpen{EntityPath: "sessions"}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
			{"a malformed path", &raftbusv1.ReceiveStreamOpen{EntityPath: "a//b"}, raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		} {
			s := c.receiveStream(ctx, 0, tc.open)
			grant(t, s, "g", 1, 0)
			if _, err := s.Recv(); reasonOf(err) != tc.want {
				t.Fatalf("a stream opened with %s ended with %v, want %v", tc.name, err, tc.want)
			}
		}
		s, err := c.client(0).msg.ReceiveStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		grant(t, s, "g", 1, 0)
		if _, err := s.Recv(); reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Fatalf("a stream granted credit before it was opened ended with %v, want INVALID_ARGUMENT", err)
		}
		s = c.receiveStream(ctx, 0, &raftbusv1.ReceiveStreamOpen{EntityPath: "errs"})
		grant(t, s, "", 1, 0)
		if _, err := s.Recv(); reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Fatalf("a grant without a receive id ended the stream with %v, want INVALID_ARGUMENT", err)
		}

		// A grant's error ends that grant only.
		s = c.receiveStream(ctx, 0, &raftbusv1.ReceiveStreamOpen{EntityPath: "errs"})
		grant(t, s, "too many", 5000, 0)
		grant(t, s, "too long", 1, time.Hour)
		grant(t, s, "fine", 1, 0)
		got := answers(t, s, "too many", "too long", "fine")
		for _, id := range []string{"too many", "too long"} {
			if e := got[id].GetError(); e.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || e.GetRetryable() || e.GetMessage() == "" {
				t.Fatalf("grant %q failed with %v, want a non-retryable INVALID_ARGUMENT saying why", id, e)
			}
		}
		if resp := got["fine"]; resp.GetError() != nil {
			t.Fatalf("a grant beside failed ones: %v", resp.GetError())
		}
		// The entity deleted under an open stream: its grants fail as a
		// Receive would.
		if _, err := c.client(0).admin.DeleteQueue(ctx, &raftbusv1.DeleteQueueRequest{Name: "errs"}); err != nil {
			t.Fatal(err)
		}
		await.Until(t, 10*time.Second, "every node to forget errs", func() bool {
			for _, nd := range c.nodes {
				if nd.meta.fsm.Entity("errs") != nil {
					return false
				}
			}
			return true
		})
		grant(t, s, "gone", 1, 0)
		if e := answer(t, s, "gone").GetError(); e.GetReason() != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
			t.Fatalf("a grant on a deleted queue failed with %v, want NOT_FOUND", e)
		}
	})

	t.Run("a broken stream's grants are recovered by replay", func(t *testing.T) {
		leader, _ := queue(t, &raftbusv1.QueueProperties{Name: "broken"})
		c.sendIDs("broken", "b1", "b2", "b3")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		streamCtx, breakStream := context.WithCancel(ctx)
		s := c.receiveStream(streamCtx, leader, &raftbusv1.ReceiveStreamOpen{EntityPath: "broken", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE})
		// "took" removes the three messages; "waits" then waits for more.
		// Neither response is read.
		grant(t, s, "took", 10, 0)
		await.Until(t, 10*time.Second, "grant took to remove the messages", func() bool { return c.peekCount(ctx, "broken") == 0 })
		grant(t, s, "waits", 10, time.Minute)
		breakStream()

		replay := func(id string) []string {
			t.Helper()
			resp, err := c.client(leader).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "broken", ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE,
				ReceiveId: []byte(id), Replay: true})
			if err != nil {
				t.Fatalf("replay %s: %v", id, err)
			}
			return messageIDs(resp.GetMessages())
		}
		if got := replay("took"); fmt.Sprint(got) != "[b1 b2 b3]" {
			t.Fatalf("the replay of the grant that removed b1..b3 returned %v", got)
		}
		// The waiting grant received nothing, and its replay keeps it
		// from receiving once the stream is gone: a message sent now
		// stays for the next receiver.
		if got := replay("waits"); len(got) != 0 {
			t.Fatalf("the replay of the waiting grant returned %v, want nothing", got)
		}
		c.sendIDs("broken", "b4")
		resp, err := c.client(leader).msg.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: "broken", MaxMessages: 10, MaxWait: durationpb.New(10 * time.Second)})
		if err != nil || fmt.Sprint(messageIDs(resp.GetMessages())) != "[b4]" {
			t.Fatalf("a receive after the break: %v, %v; want [b4]", resp, err)
		}
	})
}

// A node shutting down ends its receive streams between grants, with a
// retryable SERVER_BUSY, instead of keeping its graceful stop waiting for
// streams that have no grant to serve.
func TestShutdownEndsIdleReceiveStreams(t *testing.T) {
	c := newTestCluster(t, 1)
	createQueue(t, c.client(0), &raftbusv1.QueueProperties{Name: "q"})
	c.leaderOf("q", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := c.receiveStream(ctx, 0, &raftbusv1.ReceiveStreamOpen{EntityPath: "q"})
	grant(t, s, "before", 1, 0)
	answer(t, s, "before")

	// One node hands over nothing: its shutdown goes on handing over
	// until shutdownCtx ends.
	shutdownCtx, endShutdown := context.WithCancel(ctx)
	shutdown := make(chan error, 1)
	go func() { shutdown <- c.nodes[0].Shutdown(shutdownCtx) }()
	if _, err := s.Recv(); reasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY || !isRetryable(err) {
		t.Fatalf("an idle stream of a node shutting down ended with %v, want a retryable SERVER_BUSY", err)
	}
	endShutdown()
	if err := <-shutdown; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	c.nodes[0] = nil // closed by Shutdown
}
