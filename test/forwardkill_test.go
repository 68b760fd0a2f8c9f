package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/procs"
)

// TestForwardedBatchAcrossLeaderKillTellsTheTruth sends (SendEach),
// completes (Settle) and receives-and-deletes through a follower, which
// forwards them to the partition's leader, while the leader is SIGKILLed
// a few milliseconds later, round after round, and holds each answer to
// what the cluster did once it recovered: an operation that failed (not
// an unknown outcome) did nothing, one that succeeded took effect, and a
// receive whose outcome is unknown gives back, replayed under its receive
// id, whatever it removed. A follower asked after the leader died answers
// a batch item by item, which once turned a settlement the dead leader
// had committed into a NOT_LEADER failure.
func TestForwardedBatchAcrossLeaderKillTellsTheTruth(t *testing.T) {
	const rounds = 9
	c := procs.Start(t, raftbusd, 3)
	const queue = "orders"
	cl, adm := clientWithQueue(t, c, queue, &admin.QueueProperties{RequiresDuplicateDetection: proto.Bool(true)})
	sender, err := cl.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiver, err := cl.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	outcomes := map[string]int{}
	for round := range rounds {
		id := fmt.Sprintf("m%d", round)
		op := []string{"send", "complete", "receive"}[round%3]
		var lock []byte
		if op != "send" {
			retry(t, 30*time.Second, func(ctx context.Context) error {
				return sender.SendMessage(ctx, &client.Message{MessageID: id, Body: []byte(id)}, nil)
			})
		}
		if op == "complete" {
			retry(t, 30*time.Second, func(ctx context.Context) error {
				msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
				if err == nil && len(msgs) != 1 {
					return fmt.Errorf("received %d messages", len(msgs))
				}
				if err == nil {
					lock = msgs[0].LockToken[:]
				}
				return err
			})
		}
		leader := partitionLeader(t, c, adm, queue)
		follower := (leader + 1) % len(c.Nodes)
		ms := raftbusv1.NewMessagingServiceClient(c.Conn(follower))
		receiveID := []byte(fmt.Sprintf("receive-%d", round))
		var taken bool // the receive returned the message
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if op != "receive" {
				done <- forwardedBatch(ctx, ms, queue, id, lock)
				return
			}
			resp, err := ms.Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: queue, ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE,
				MaxMessages: 10, ReceiveId: receiveID})
			taken = returns(resp.GetMessages(), id)
			done <- err
		}()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // the moment of the kill, not synchronisation
		c.Kill(leader)
		err := <-done
		c.Restart(leader)
		c.WaitReady(leader, 30*time.Second)

		kind := "failed"
		switch {
		case err == nil:
			kind = "succeeded"
		case unknownOutcome(err):
			kind = "unknown"
		}
		outcomes[kind]++
		var present bool
		retry(t, 30*time.Second, func(ctx context.Context) error {
			var err error
			present, err = holds(ctx, cl, queue, id)
			return err
		})
		if op == "receive" && kind == "unknown" {
			// Replayed under its id, a receive gives back what it removed.
			retry(t, 30*time.Second, func(ctx context.Context) error {
				resp, err := raftbusv1.NewMessagingServiceClient(c.Conn(follower)).Receive(ctx, &raftbusv1.ReceiveRequest{EntityPath: queue,
					ReceiveMode: raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE, ReceiveId: receiveID, Replay: true})
				taken = returns(resp.GetMessages(), id)
				return err
			})
			if !taken && !present {
				t.Fatalf("round %d: %s is gone, and the receive of unknown outcome, replayed, did not return it", round, id)
			}
		}
		// A send that took effect stores the message; a complete or a
		// receive-and-delete that took effect removes it.
		tookEffect := present == (op == "send")
		switch {
		case op == "receive" && kind == "succeeded" && taken == present:
			t.Fatalf("round %d: the receive returned %s: %v, and it is still there: %v", round, id, taken, present)
		case kind == "succeeded" && op != "receive" && !tookEffect:
			t.Fatalf("round %d: the %s of %s succeeded and did not take effect", round, op, id)
		case kind == "failed" && tookEffect:
			t.Fatalf("round %d: the %s of %s failed (%v) and took effect", round, op, id, err)
		}
		// Leave the queue empty for the next round.
		retry(t, 30*time.Second, func(ctx context.Context) error {
			r, err := cl.NewReceiverForQueue(queue, &client.ReceiverOptions{ReceiveMode: client.ReceiveModeReceiveAndDelete})
			if err != nil {
				return err
			}
			for {
				msgs, err := r.ReceiveMessages(ctx, 100, &client.ReceiveMessagesOptions{MaxWaitTime: 100 * time.Millisecond})
				if err != nil || len(msgs) == 0 {
					return err
				}
			}
		})
	}
	t.Logf("%d rounds: %v", rounds, outcomes)
}

// forwardedBatch sends message id to queue with SendEach, or, with a lock
// token, completes it with Settle, through ms (a follower: it forwards),
// and returns the item's failure as a gRPC status.
func forwardedBatch(ctx context.Context, ms raftbusv1.MessagingServiceClient, queue, id string, lock []byte) error {
	var info *raftbusv1.ErrorInfo
	if lock == nil {
		resp, err := ms.SendEach(ctx, &raftbusv1.SendEachRequest{EntityPath: queue, Messages: []*raftbusv1.PartitionedMessage{
			{Message: &raftbusv1.Message{MessageId: id, Body: []byte(id)}}}})
		if err != nil {
			return err
		}
		info = resp.GetResults()[0].GetError()
	} else {
		resp, err := ms.Settle(ctx, &raftbusv1.SettleRequest{Settlements: []*raftbusv1.Settlement{{
			Lock: &raftbusv1.MessageLock{EntityPath: queue, LockToken: lock}, Disposition: raftbusv1.Disposition_DISPOSITION_COMPLETE}}})
		if err != nil {
			return err
		}
		info = resp.GetResults()[0].GetError()
	}
	if info == nil {
		return nil
	}
	st, _ := status.New(info.GetReason().StatusCode(), info.GetMessage()).WithDetails(info)
	return st.Err()
}

// returns reports whether msgs hold the message with id.
func returns(msgs []*raftbusv1.ReceivedMessage, id string) bool {
	for _, m := range msgs {
		if m.GetMessage().GetMessageId() == id {
			return true
		}
	}
	return false
}

// unknownOutcome reports whether err leaves the outcome open: an
// OUTCOME_UNKNOWN, or no answer at all (the node died, the deadline
// passed).
func unknownOutcome(err error) bool {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*raftbusv1.ErrorInfo); ok {
			return info.GetReason() == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN
		}
	}
	return st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded
}

// holds reports whether queue holds a message with id, peeking all of it.
func holds(ctx context.Context, cl *client.Client, queue, id string) (bool, error) {
	r, err := cl.NewReceiverForQueue(queue, nil)
	if err != nil {
		return false, err
	}
	from := int64(0)
	for {
		msgs, err := r.PeekMessages(ctx, 100, &client.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil || len(msgs) == 0 {
			return false, err
		}
		for _, m := range msgs {
			if m.MessageID == id {
				return true, nil
			}
		}
		from = msgs[len(msgs)-1].SequenceNumber + 1
	}
}
