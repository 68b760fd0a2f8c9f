package partition_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

const queue = "orders"

func configure(t testing.TB, p *partition.Partition, props *raftbusv1.QueueProperties) {
	t.Helper()
	if props == nil {
		props = &raftbusv1.QueueProperties{}
	}
	props.Name = queue
	_, err := p.Apply(context.Background(), &enginev1.Command{Body: &enginev1.Command_ConfigureEntity{
		ConfigureEntity: &enginev1.ConfigureEntity{EntityPath: queue, Properties: props},
	}})
	if err != nil {
		t.Fatalf("configure queue: %v", err)
	}
}

func sendCmd(msgs ...*raftbusv1.Message) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Send{Send: &enginev1.Send{EntityPath: queue, Messages: msgs}}}
}

func lockCmd(n int32) *enginev1.Lock {
	return &enginev1.Lock{EntityPath: queue, MaxMessages: n}
}

func completeCmd(token []byte) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Settle{Settle: &enginev1.Settle{
		EntityPath: queue, LockToken: token, Disposition: enginev1.Disposition_DISPOSITION_COMPLETE,
	}}}
}

// peekAll returns every message of the queue as the leader sees it.
func peekAll(t *testing.T, p *partition.Partition) []*raftbusv1.ReceivedMessage {
	t.Helper()
	var msgs []*raftbusv1.ReceivedMessage
	var perr error
	if err := p.Read(context.Background(), func(e *engine.Engine) {
		msgs, perr = e.Peek(queue, raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, 0, 1<<20, 0)
	}); err != nil {
		t.Fatalf("read: %v", err)
	}
	if perr != nil {
		t.Fatalf("peek: %v", perr)
	}
	return msgs
}

func TestReplicasConvergeAfterSendLockComplete(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.replicas[c.leader()]
	configure(t, p, nil)
	ctx := context.Background()
	for i := range 20 {
		if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: strconv.Itoa(i), Body: []byte("hello")})); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	got, err := p.Receive(ctx, lockCmd(10), 0)
	if err != nil || len(got) != 10 {
		t.Fatalf("receive: %d messages, err %v; want 10", len(got), err)
	}
	for _, m := range got[:5] {
		if _, err := p.Apply(ctx, completeCmd(m.LockToken)); err != nil {
			t.Fatalf("complete %d: %v", m.SequenceNumber, err)
		}
	}
	if n := len(peekAll(t, p)); n != 15 {
		t.Fatalf("after completing 5 of 20: %d messages left, want 15", n)
	}
	c.converged()
}

func TestFollowerRejectsWithLeaderHint(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.replicas[(l+1)%3]
	_, err := f.Apply(context.Background(), sendCmd(&raftbusv1.Message{Body: []byte("x")}))
	var pe *partition.Error
	if !errors.As(err, &pe) || pe.Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER {
		t.Fatalf("send to follower: %v, want NOT_LEADER", err)
	}
	if pe.LeaderID != nodeID(l) || !pe.Retryable {
		t.Fatalf("NOT_LEADER hint %q retryable %v, want %q retryable", pe.LeaderID, pe.Retryable, nodeID(l))
	}
	if err := f.Read(context.Background(), func(*engine.Engine) {}); partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER {
		t.Fatalf("read on follower: %v, want NOT_LEADER", err)
	}
}

func TestEngineRejectionsKeepTheirReason(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.replicas[c.leader()]
	configure(t, p, nil)
	_, err := p.Apply(context.Background(), completeCmd(make([]byte, 16)))
	if partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_LOCK_LOST {
		t.Fatalf("complete with unknown token: %v, want MESSAGE_LOCK_LOST", err)
	}
	_, err = p.Receive(context.Background(), &enginev1.Lock{EntityPath: "nope", MaxMessages: 1}, time.Second)
	if partition.ReasonOf(err) != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		t.Fatalf("receive from unknown entity: %v, want NOT_FOUND", err)
	}
}

// history records what the clients of a partition were told.
type history struct {
	mu        sync.Mutex
	acked     map[string]int64 // message id -> sequence number
	completed map[string]int64 // message id -> sequence number
	// Completes whose outcome the receiver could not know.
	maybeCompleted map[string]int64
}

// verify checks the messages a leader holds against what clients were
// told: every acknowledged send is held, under its sequence number and
// with its bytes (each body is its message id), unless its completion may
// have taken effect; nothing is held twice; nothing whose completion was
// acknowledged is held; and, as nothing else removes messages, the numbers
// of what is held and what was completed are 1..n. It returns how many
// messages are held.
func (h *history) verify(t *testing.T, held []*raftbusv1.ReceivedMessage) int {
	t.Helper()
	present := map[string]int64{}
	var seqs []int64
	for _, m := range held {
		id := m.Message.MessageId
		if string(m.Message.Body) != id {
			t.Errorf("message %s (seq %d) holds %q", id, m.SequenceNumber, m.Message.Body)
		}
		if _, dup := present[id]; dup {
			t.Errorf("message %s held twice", id)
		}
		present[id] = m.SequenceNumber
		seqs = append(seqs, m.SequenceNumber)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, seq := range h.acked {
		_, done := h.completed[id]
		_, maybe := h.maybeCompleted[id]
		if done || maybe {
			continue
		}
		if s, ok := present[id]; !ok || s != seq {
			t.Errorf("acknowledged message %s (seq %d) is missing", id, seq)
		}
	}
	for id := range h.completed {
		if _, ok := present[id]; ok {
			t.Errorf("completed message %s came back", id)
		}
	}
	for _, s := range h.completed {
		seqs = append(seqs, s)
	}
	for id, s := range h.maybeCompleted {
		if _, ok := present[id]; !ok {
			seqs = append(seqs, s)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("sequence numbers not gap-free and unique: position %d holds %d", i, s)
		}
	}
	return len(present)
}

// TestLeaderCrashLosesNothingAcknowledged kills the leader while senders
// stream messages and a receiver completes them, then checks the new
// leader's state against what clients were told.
func TestLeaderCrashLosesNothingAcknowledged(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	configure(t, c.replicas[c.leader()], nil)
	h := &history{acked: map[string]int64{}, completed: map[string]int64{}, maybeCompleted: map[string]int64{}}

	var mu sync.Mutex // guards c.replicas while the leader is killed
	current := func() *partition.Partition {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range c.replicas {
			if p != nil && p.IsLeader() {
				return p
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const senders, perSender = 4, 150
	var wg sync.WaitGroup
	ackedOne := make(chan struct{}, senders*perSender)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perSender && ctx.Err() == nil; {
				id := fmt.Sprintf("s%d-%d", s, i)
				p := current()
				if p == nil {
					time.Sleep(10 * time.Millisecond) // no leader yet
					continue
				}
				res, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: id, Body: []byte(id)}))
				switch partition.ReasonOf(err) {
				case raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED:
					if err != nil {
						t.Errorf("send %s: %v", id, err)
						return
					}
					h.mu.Lock()
					h.acked[id] = res.GetSend().Messages[0].SequenceNumber
					h.mu.Unlock()
					ackedOne <- struct{}{}
				case raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
					// May or may not be in the log; not counted as acked.
				default:
					time.Sleep(10 * time.Millisecond) // NOT_LEADER, busy: retry
					continue
				}
				i++
			}
		}()
	}
	// A receiver completes messages through whichever replica leads.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			p := current()
			if p == nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			msgs, err := p.Receive(ctx, lockCmd(8), 50*time.Millisecond)
			if err != nil {
				continue
			}
			for _, m := range msgs {
				_, err := p.Apply(ctx, completeCmd(m.LockToken))
				h.mu.Lock()
				switch {
				case err == nil:
					h.completed[m.Message.MessageId] = m.SequenceNumber
				case partition.ReasonOf(err) == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
					h.maybeCompleted[m.Message.MessageId] = m.SequenceNumber
				}
				h.mu.Unlock()
			}
			h.mu.Lock()
			done := len(h.completed) >= 200
			h.mu.Unlock()
			if done {
				return
			}
		}
	}()

	for range 100 {
		<-ackedOne
	}
	mu.Lock()
	leader := -1
	for i, p := range c.replicas {
		if p != nil && p.IsLeader() {
			leader = i
		}
	}
	c.kill(leader)
	mu.Unlock()
	wg.Wait()
	if t.Failed() {
		return
	}

	held := h.verify(t, peekAll(t, c.replicas[c.leader()]))
	t.Logf("acked %d sends, completed %d, %d held after failover", len(h.acked), len(h.completed), held)
	c.converged()
}

// TestRepeatedReceiveIsAnsweredAtOnceFromItsReceipt repeats a receive that
// took every available message: the repeat must not wait for new messages
// (there are none to see) but return the first receive's messages at once.
func TestRepeatedReceiveIsAnsweredAtOnceFromItsReceipt(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.replicas[c.leader()]
	configure(t, p, nil)
	ctx := context.Background()
	if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{MessageId: "a", Body: []byte("a")})); err != nil {
		t.Fatal(err)
	}
	lock := lockCmd(5)
	lock.ReceiveId = []byte("receive-1")
	first, err := p.Receive(ctx, lock, 0)
	if err != nil || len(first) != 1 {
		t.Fatalf("receive: %v, %v", first, err)
	}
	start := time.Now()
	again, err := p.Receive(ctx, lock, time.Minute)
	if err != nil || len(again) != 1 || string(again[0].GetLockToken()) != string(first[0].GetLockToken()) {
		t.Fatalf("repeat: %v, %v; want the first receive's message", again, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the repeat waited %v", d)
	}
	// A replay of an id that received nothing returns at once, empty.
	replay := lockCmd(5)
	replay.ReceiveId, replay.Replay = []byte("receive-2"), true
	if got, err := p.Receive(ctx, replay, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("replay: %v, %v", got, err)
	}
}

// TestACallerAlreadyGoneProposesNothing: a command whose caller's context
// has ended fails with the context's error and never reaches the log,
// however much room the proposer's queue has (a select between the two
// would pick either). Tried 32 times, a coin toss would pass once in
// four billion runs.
func TestACallerAlreadyGoneProposesNothing(t *testing.T) {
	p := openAlone(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 32 {
		if _, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("gone")})); !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d: a send whose caller is gone: %v, want context.Canceled", i, err)
		}
	}
	// A later command is applied after anything the gone ones proposed.
	if _, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{Body: []byte("here")})); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range peekAll(t, p) {
		bodies = append(bodies, string(m.GetMessage().GetBody()))
	}
	if fmt.Sprint(bodies) != "[here]" {
		t.Fatalf("the queue holds %q, want only the send whose caller waited", bodies)
	}
}
