package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/test/procs"
)

// TestSettleAcrossLeaderKillTellsTheTruth completes the first message of
// a session's received batch while the partition's leader is SIGKILLed a
// few milliseconds later, again and again, and holds the client's answer
// to what the cluster did once it recovered: a complete that failed (not
// an unknown outcome) must have left the message in the queue, and one
// that succeeded must have removed it. The soak once found a session
// message gone after its complete failed with NOT_LEADER everywhere; this
// aims at that moment directly. RAFTBUS_SETTLE_KILL_ROUNDS sets the
// rounds (default 6).
func TestSettleAcrossLeaderKillTellsTheTruth(t *testing.T) {
	rounds := 6
	if v := os.Getenv("RAFTBUS_SETTLE_KILL_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RAFTBUS_SETTLE_KILL_ROUNDS: %q", v)
		}
		rounds = n
	}
	c := procs.Start(t, raftbusd, 3)
	const queue = "sessions"
	cl, adm := clientWithQueue(t, c, queue, &admin.QueueProperties{RequiresSession: proto.Bool(true), RequiresDuplicateDetection: proto.Bool(true)})
	sender, err := cl.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var failed, unknown, ok int
	for round := range rounds {
		session := fmt.Sprintf("s%d", round)
		retry(t, 30*time.Second, func(ctx context.Context) error {
			var batch []*client.Message
			for i := range 5 {
				id := fmt.Sprintf("%s-%d", session, i)
				batch = append(batch, &client.Message{MessageID: id, SessionID: session, Body: []byte(id)})
			}
			return sender.SendMessages(ctx, batch)
		})
		var s *client.SessionReceiver
		var msgs []*client.ReceivedMessage
		retry(t, 30*time.Second, func(ctx context.Context) error {
			var err error
			if s, err = cl.AcceptSessionForQueue(ctx, queue, session, nil); err != nil {
				return err
			}
			msgs, err = s.ReceiveMessages(ctx, 5, nil)
			if err == nil && len(msgs) != 5 {
				err = fmt.Errorf("received %d of 5 messages", len(msgs))
			}
			return err
		})
		leader := partitionLeader(t, c, adm, queue)
		first := msgs[0]
		t.Logf("round %d: leader %s, completing seq %d token %x", round, c.Nodes[leader].Addr, first.SequenceNumber, first.LockToken)
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done <- s.CompleteMessage(ctx, first, nil)
		}()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // the moment of the kill, not synchronisation
		c.Kill(leader)
		err := <-done
		c.Restart(leader)
		c.WaitReady(leader, 30*time.Second)

		var ce *client.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &ce) && ce.Code == client.CodeOutcomeUnknown, errors.Is(err, context.DeadlineExceeded):
			unknown++
		default:
			failed++
		}
		// Once a leader serves the partition again, see whether the first
		// message is still there.
		var present bool
		retry(t, 30*time.Second, func(ctx context.Context) error {
			r, err := cl.NewReceiverForQueue(queue, nil)
			if err != nil {
				return err
			}
			from := first.SequenceNumber
			peeked, err := r.PeekMessages(ctx, 1, &client.PeekMessagesOptions{FromSequenceNumber: &from})
			if err != nil {
				return err
			}
			present = len(peeked) == 1 && peeked[0].SequenceNumber == first.SequenceNumber
			return nil
		})
		switch {
		case err == nil && present:
			t.Fatalf("round %d: the complete of seq %d succeeded and the message is still there", round, first.SequenceNumber)
		case err != nil && !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ce) && ce.Code == client.CodeOutcomeUnknown) && !present:
			t.Fatalf("round %d: the complete of seq %d failed (%v) and the message is gone", round, first.SequenceNumber, err)
		}
	}
	t.Logf("%d rounds: complete succeeded %d, outcome unknown %d, failed %d", rounds, ok, unknown, failed)
}

// clientWithQueue is an SDK client of c that retries briefly (so that a
// fault shows in the answer rather than being waited out), its admin
// client, and queue created with props.
func clientWithQueue(t *testing.T, c *procs.Cluster, queue string, props *admin.QueueProperties) (*client.Client, *admin.Client) {
	t.Helper()
	cl, err := client.New(c.Addrs(), &client.ClientOptions{
		RetryOptions: client.RetryOptions{MaxRetries: 3, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	adm := admin.NewFromClient(cl)
	await.Until(t, 30*time.Second, "queue "+queue, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := adm.CreateQueue(ctx, queue, props)
		var ce *client.Error
		return err == nil || errors.As(err, &ce) && ce.Code == client.CodeAlreadyExists
	})
	return cl, adm
}

// partitionLeader is the node leading the only partition of path.
func partitionLeader(t *testing.T, c *procs.Cluster, adm *admin.Client, path string) int {
	t.Helper()
	leader := -1
	await.Until(t, 30*time.Second, "a leader of "+path, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		table, err := adm.GetRoutingTable(ctx, path)
		if err != nil || len(table) == 0 || len(table[0].GetPartitions()) == 0 {
			return false
		}
		leader = c.IndexOf(table[0].GetPartitions()[0].GetLeaderAddress())
		return leader >= 0
	})
	return leader
}

// retry runs op until it succeeds or timeout passes, backing off between
// attempts.
func retry(t *testing.T, timeout time.Duration, op func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := op(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(min(20*time.Millisecond<<min(attempt, 5), 500*time.Millisecond))
	}
}
