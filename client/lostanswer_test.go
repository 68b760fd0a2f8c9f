package client_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/test/proxy"
)

// TestLostAnswers runs the SDK through a proxy that loses the answer to a
// call after the broker handled it: what took effect must neither be done
// twice nor lost, and what the client cannot know is reported unknown.
func TestLostAnswers(t *testing.T) {
	e := startEnv(t, 1)
	p := proxy.Start(t, e.cluster.Nodes[0].Addr)
	// Every connection of this client, whatever address the routing table
	// names, goes through the proxy.
	lossy, err := client.New([]string{e.cluster.Nodes[0].Addr}, &client.ClientOptions{
		RetryOptions: client.RetryOptions{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond},
		DialOptions:  []grpc.DialOption{grpc.WithContextDialer(p.Dialer())},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lossy.Close() })
	l := &lossyEnv{env: e, c: lossy, p: p}
	t.Run("SendWithoutDuplicateDetection", l.testSendWithoutDuplicateDetection)
	t.Run("SendWithDuplicateDetection", l.testSendWithDuplicateDetection)
	t.Run("PeekLockReceive", l.testPeekLockReceive)
	t.Run("ReceiveAndDelete", l.testReceiveAndDelete)
	t.Run("ReceiveAfterStreamBreak", l.testReceiveAfterStreamBreak)
	t.Run("ReceiveAcrossPartitions", l.testReceiveAcrossPartitions)
	t.Run("Session", l.testSession)
	t.Run("Settlement", l.testSettlement)

	// A client that does not repeat: an unknown outcome reaches the caller,
	// and what the receive took is handed out by the next one.
	once, err := client.New([]string{e.cluster.Nodes[0].Addr}, &client.ClientOptions{
		RetryOptions: client.RetryOptions{MaxRetries: -1},
		DialOptions:  []grpc.DialOption{grpc.WithContextDialer(p.Dialer())},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { once.Close() })
	l = &lossyEnv{env: e, c: once, p: p}
	t.Run("UnknownReceiveIsClaimedByTheNext", l.testUnknownReceiveIsClaimedByTheNext)
	t.Run("UnknownDeferredReceiveIsClaimedByTheNext", l.testUnknownDeferredReceiveIsClaimedByTheNext)
	t.Run("UnknownReceiveWhoseLocksEndedIsDropped", l.testUnknownReceiveWhoseLocksEndedIsDropped)
}

type lossyEnv struct {
	*env
	c *client.Client
	p *proxy.Proxy
}

// warm makes one call that succeeds, so that the client has the entity's
// route cached and the next lost answer is that of the call under test.
func (l *lossyEnv) warm(t *testing.T, queue string) {
	t.Helper()
	s, _ := l.c.NewSender(queue, nil)
	if err := s.CancelScheduledMessages(ctxT(t, 10*time.Second), []int64{0}, nil); err != nil {
		t.Fatal(err)
	}
}

func (l *lossyEnv) active(t *testing.T, queue string) (active, locked int64) {
	t.Helper()
	rt, err := l.admin.GetQueueRuntimeProperties(ctxT(t, 10*time.Second), queue)
	if err != nil {
		t.Fatal(err)
	}
	return rt.GetActiveMessageCount(), rt.GetLockedMessageCount()
}

func (l *lossyEnv) testSendWithoutDuplicateDetection(t *testing.T) {
	l.createQueue("lost-send", nil)
	l.warm(t, "lost-send")
	s, _ := l.c.NewSender("lost-send", nil)
	l.p.DropResponses(1)
	// A MessageID alone does not make a resend harmless: without duplicate
	// detection the broker would store it twice.
	err := s.SendMessage(ctxT(t, 10*time.Second), &client.Message{MessageID: "m", Body: []byte("x")}, nil)
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("send whose answer was lost: %v, want the unknown outcome", err)
	}
	if n, _ := l.active(t, "lost-send"); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
}

func (l *lossyEnv) testSendWithDuplicateDetection(t *testing.T) {
	l.createQueue("lost-send-dd", &admin.QueueProperties{RequiresDuplicateDetection: proto.Bool(true)})
	l.warm(t, "lost-send-dd")
	s, _ := l.c.NewSender("lost-send-dd", nil)
	l.p.DropResponses(1)
	var res client.SendResult
	if err := s.SendMessage(ctxT(t, 10*time.Second), &client.Message{MessageID: "m", Body: []byte("x")}, &client.SendMessageOptions{Result: &res}); err != nil {
		t.Fatalf("send whose answer was lost, with duplicate detection: %v", err)
	}
	if !res.Duplicate || l.p.Dropped() == 0 {
		t.Fatalf("result %+v after %d lost answers: want the resend taken as a duplicate", res, l.p.Dropped())
	}
	if n, _ := l.active(t, "lost-send-dd"); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
}

// sendTwo sends "first" then "second" through the reliable client.
func (l *lossyEnv) sendTwo(t *testing.T, queue string) {
	t.Helper()
	s := l.sender(queue)
	for _, id := range []string{"first", "second"} {
		if err := s.SendMessage(ctxT(t, 10*time.Second), &client.Message{MessageID: id, Body: []byte(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func (l *lossyEnv) testPeekLockReceive(t *testing.T) {
	l.createQueue("lost-lock", nil)
	l.sendTwo(t, "lost-lock")
	l.warm(t, "lost-lock")
	r, _ := l.c.NewReceiverForQueue("lost-lock", nil)
	dropped := l.p.Dropped()
	l.p.DropResponses(1)
	got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
	if err != nil || len(got) != 1 || l.p.Dropped() != dropped+1 {
		t.Fatalf("receive: %v, %v after %d lost answers", got, err, l.p.Dropped()-dropped)
	}
	// The repeat got the message the lost answer carried, delivered once,
	// and locked nothing else.
	if got[0].MessageID != "first" || got[0].DeliveryCount != 1 {
		t.Fatalf("received %s (delivery count %d), want first, delivered once", got[0].MessageID, got[0].DeliveryCount)
	}
	if _, locked := l.active(t, "lost-lock"); locked != 1 {
		t.Fatalf("%d messages locked, want the one received", locked)
	}
	if err := r.CompleteMessage(ctxT(t, 10*time.Second), got[0], nil); err != nil {
		t.Fatal(err)
	}
}

// A settlement whose answer was lost is repeated, and the broker knows the
// repeat for what it is: the caller learns that it took effect, once.
func (l *lossyEnv) testSettlement(t *testing.T) {
	l.createQueue("lost-settle", nil)
	l.sendTwo(t, "lost-settle")
	l.warm(t, "lost-settle")
	r, _ := l.c.NewReceiverForQueue("lost-settle", nil)
	got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 2, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	dropped := l.p.Dropped()
	l.p.DropResponses(1)
	if err := r.CompleteMessage(ctxT(t, 10*time.Second), got[0], nil); err != nil {
		t.Fatalf("complete whose answer was lost: %v, want success", err)
	}
	l.p.DropResponses(1)
	if err := r.AbandonMessage(ctxT(t, 10*time.Second), got[1], nil); err != nil {
		t.Fatalf("abandon whose answer was lost: %v, want success", err)
	}
	if n := l.p.Dropped() - dropped; n != 2 {
		t.Fatalf("%d answers lost, want 2", n)
	}
	// The call's retry was a repeat; another call is a second settlement.
	if err := r.CompleteMessage(ctxT(t, 10*time.Second), got[0], nil); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("a second complete: %v, want the lock lost", err)
	}
	if active, locked := l.active(t, "lost-settle"); active != 1 || locked != 0 {
		t.Fatalf("%d active and %d locked, want the abandoned one available", active, locked)
	}
	again, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 2, nil)
	if err != nil || len(again) != 1 || again[0].MessageID != got[1].MessageID || again[0].DeliveryCount != 2 {
		t.Fatalf("after the settlements received %v, %v; want %s once more", again, err, got[1].MessageID)
	}
	if err := r.CompleteMessage(ctxT(t, 10*time.Second), again[0], nil); err != nil {
		t.Fatal(err)
	}
}

func (l *lossyEnv) testReceiveAndDelete(t *testing.T) {
	l.createQueue("lost-rad", nil)
	l.sendTwo(t, "lost-rad")
	l.warm(t, "lost-rad")
	r, _ := l.c.NewReceiverForQueue("lost-rad", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	var ids []string
	for range 2 {
		l.p.DropResponses(1)
		got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("receive and delete whose answer was lost: %v, %v", got, err)
		}
		ids = append(ids, got[0].MessageID)
	}
	if ids[0] != "first" || ids[1] != "second" {
		t.Fatalf("received %v, want first then second: none lost", ids)
	}
	if n, _ := l.active(t, "lost-rad"); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

func (l *lossyEnv) testReceiveAcrossPartitions(t *testing.T) {
	l.createQueue("lost-parts", &admin.QueueProperties{PartitionCount: proto.Uint32(4)})
	s := l.sender("lost-parts")
	for _, key := range []string{"a", "b", "c", "d"} {
		if err := s.SendMessage(ctxT(t, 10*time.Second), &client.Message{PartitionKey: key, MessageID: key, Body: []byte(key)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	l.warm(t, "lost-parts")
	r, _ := l.c.NewReceiverForQueue("lost-parts", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	seen := map[string]int{}
	for len(seen) < 4 {
		l.p.DropResponses(1)
		got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, &client.ReceiveMessagesOptions{MaxWaitTime: 2 * time.Second})
		if err != nil || len(got) != 1 {
			t.Fatalf("receive across partitions whose answer was lost: %v, %v (seen %v)", got, err, seen)
		}
		seen[got[0].MessageID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s received %d times", id, n)
		}
	}
	if n, _ := l.active(t, "lost-parts"); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

func (l *lossyEnv) testSession(t *testing.T) {
	l.createQueue("lost-session", &admin.QueueProperties{RequiresSession: proto.Bool(true), LockDuration: durationpb.New(2 * time.Second)})
	s := l.sender("lost-session")
	for _, id := range []string{"first", "second"} {
		if err := s.SendMessage(ctxT(t, 10*time.Second), &client.Message{MessageID: id, SessionID: "s", Body: []byte(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	l.warm(t, "lost-session")
	// Accepting a named session whose answer was lost: a repeat would find
	// the session locked (by this very caller), so the caller is told the
	// outcome is unknown.
	l.p.DropResponses(1)
	if _, err := l.c.AcceptSessionForQueue(ctxT(t, 10*time.Second), "lost-session", "s", nil); !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("accept whose answer was lost: %v, want the unknown outcome", err)
	}
	// The session lock the lost answer carried expires; then the session
	// is accepted again and received from, an answer lost once more.
	var sr *client.SessionReceiver
	for sr == nil {
		var err error
		sr, err = l.c.AcceptSessionForQueue(ctxT(t, 10*time.Second), "lost-session", "s", nil)
		if err != nil && !errors.Is(err, client.ErrSessionCannotBeLocked) {
			t.Fatal(err)
		}
	}
	l.p.DropResponses(1)
	got, err := sr.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "first" || got[0].DeliveryCount != 1 {
		t.Fatalf("session receive whose answer was lost: %v, %v; want first, delivered once", got, err)
	}
}

func (l *lossyEnv) testUnknownReceiveIsClaimedByTheNext(t *testing.T) {
	for _, tc := range []struct {
		queue      string
		partitions uint32
		// lost is how many answers to lose: across partitions the client
		// asks for a replay after the first is lost, so both are lost.
		lost int
	}{{"unclaimed-one", 1, 1}, {"unclaimed-parts", 3, 2}} {
		t.Run(tc.queue, func(t *testing.T) {
			l.createQueue(tc.queue, &admin.QueueProperties{PartitionCount: proto.Uint32(tc.partitions)})
			l.sendTwo(t, tc.queue)
			l.warm(t, tc.queue)
			r, _ := l.c.NewReceiverForQueue(tc.queue, &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
			l.p.DropResponses(tc.lost)
			if got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil); !errors.Is(err, client.ErrOutcomeUnknown) {
				t.Fatalf("receive whose answers were lost: %v, %v; want the unknown outcome", got, err)
			}
			var ids []string
			for len(ids) < 2 {
				got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range got {
					ids = append(ids, m.MessageID)
				}
			}
			if len(ids) != 2 || ids[0] == ids[1] {
				t.Fatalf("received %v after the unknown receive; want first and second, none lost", ids)
			}
			if n, _ := l.active(t, tc.queue); n != 0 {
				t.Fatalf("%d messages left", n)
			}
		})
	}
}

func (l *lossyEnv) testUnknownDeferredReceiveIsClaimedByTheNext(t *testing.T) {
	l.createQueue("unclaimed-deferred", nil)
	l.sendTwo(t, "unclaimed-deferred")
	reliable, _ := l.env.c.NewReceiverForQueue("unclaimed-deferred", nil)
	got, err := reliable.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	if err := reliable.DeferMessage(ctxT(t, 10*time.Second), got[0], nil); err != nil {
		t.Fatal(err)
	}
	seq := got[0].SequenceNumber
	l.warm(t, "unclaimed-deferred")
	r, _ := l.c.NewReceiverForQueue("unclaimed-deferred", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	l.p.DropResponses(1)
	if got, err := r.ReceiveDeferredMessages(ctxT(t, 10*time.Second), []int64{seq}, nil); !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("deferred receive whose answer was lost: %v, %v; want the unknown outcome", got, err)
	}
	// Asked again, the message the lost answer carried is handed out (it
	// was removed by then, so a fresh request would find nothing).
	again, err := r.ReceiveDeferredMessages(ctxT(t, 10*time.Second), []int64{seq}, nil)
	if err != nil || len(again) != 1 || again[0].MessageID != got[0].MessageID {
		t.Fatalf("deferred receive asked again: %v, %v; want %s", again, err, got[0].MessageID)
	}
}

// A receive stream that breaks after the server served a grant (the
// answer lost with the connection) leaves a receive of unknown outcome:
// it is recovered by a replay of its receive id, so ReceiveMessages gets
// the message it removed, and the next one opens a new stream and goes
// on.
func (l *lossyEnv) testReceiveAfterStreamBreak(t *testing.T) {
	l.createQueue("stream-break", nil)
	l.sendTwo(t, "stream-break")
	l.warm(t, "stream-break")
	r, _ := l.c.NewReceiverForQueue("stream-break", &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
	dropped := l.p.Dropped()
	// The stream's first answer is cut with its connection.
	l.p.DropResponses(1)
	got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "first" || l.p.Dropped() != dropped+1 {
		t.Fatalf("receive on a stream that broke: %v, %v after %d lost answers; want first, after one", got, err, l.p.Dropped()-dropped)
	}
	got, err = r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "second" {
		t.Fatalf("receive after the stream broke: %v, %v; want second", got, err)
	}
	if n, _ := l.active(t, "stream-break"); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// A receive of unknown outcome whose locks end before the next receive
// claims it delivered its messages unseen: the next receive is not failed
// for it (the replay's MESSAGE_LOCK_LOST is that receive's), and receives
// the messages again, each delivery counted.
func (l *lossyEnv) testUnknownReceiveWhoseLocksEndedIsDropped(t *testing.T) {
	for _, tc := range []struct {
		queue      string
		partitions uint32
		lost       int
	}{{"ended-one", 1, 1}, {"ended-parts", 3, 2}} {
		t.Run(tc.queue, func(t *testing.T) {
			l.createQueue(tc.queue, &admin.QueueProperties{PartitionCount: proto.Uint32(tc.partitions), LockDuration: durationpb.New(time.Second)})
			l.sendTwo(t, tc.queue)
			l.warm(t, tc.queue)
			r, _ := l.c.NewReceiverForQueue(tc.queue, nil)
			l.p.DropResponses(tc.lost)
			if got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 1, nil); !errors.Is(err, client.ErrOutcomeUnknown) {
				t.Fatalf("receive whose answers were lost: %v, %v; want the unknown outcome", got, err)
			}
			await.Until(t, 10*time.Second, "the lock to end", func() bool {
				_, locked := l.active(t, tc.queue)
				return locked == 0
			})
			counts := map[string]int{}
			for len(counts) < 2 {
				got, err := r.ReceiveMessages(ctxT(t, 10*time.Second), 2, nil)
				if err != nil {
					t.Fatalf("receive after the unknown one's locks ended: %v", err)
				}
				for _, m := range got {
					counts[m.MessageID] = int(m.DeliveryCount)
					if err := r.CompleteMessage(ctxT(t, 10*time.Second), m, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if counts["first"]+counts["second"] != 3 {
				t.Fatalf("delivery counts %v: want one of them delivered before, unseen", counts)
			}
		})
	}
}
