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

// clientLoad is clients of a partition's replicas: senders that stream
// messages and a receiver that completes them, through whichever replica
// leads, recording in h what they were told. A test replaces replicas
// (kills them, cuts their power, restarts them) only inside disrupt.
type clientLoad struct {
	t  *testing.T
	c  *testCluster
	h  *history
	wg sync.WaitGroup
	// mu is held for writing while replicas are replaced.
	mu sync.RWMutex
	// epoch is moved on by a disruption after which answers to calls made
	// before it no longer count (a power cut may take back what a leader
	// answered before it synced): an answer is an acknowledgement only in
	// the epoch its call was made in.
	epoch int
	acked chan struct{} // one for each send acknowledged
}

func newClientLoad(t *testing.T, c *testCluster) *clientLoad {
	return &clientLoad{t: t, c: c, acked: make(chan struct{}, 1<<16),
		h: &history{acked: map[string]int64{}, completed: map[string]int64{}, maybeCompleted: map[string]int64{}}}
}

// leader is the replica that leads now, if any, and the epoch.
func (l *clientLoad) leader() (*partition.Partition, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, p := range l.c.replicas {
		if p != nil && p.IsLeader() {
			return p, l.epoch
		}
	}
	return nil, l.epoch
}

// disrupt runs f, which replaces replicas, while no client looks at them.
func (l *clientLoad) disrupt(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// apply makes one call to p, bounded so that a replica cut off mid-call
// does not hold its client forever.
func (l *clientLoad) apply(ctx context.Context, p *partition.Partition, cmd *enginev1.Command) (*enginev1.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return p.Apply(ctx, cmd)
}

// startSenders starts senders that send perSender messages each (until ctx
// ends when perSender is 0), each message's body its id.
func (l *clientLoad) startSenders(ctx context.Context, senders, perSender int) {
	for s := range senders {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; (perSender == 0 || i < perSender) && ctx.Err() == nil; {
				id := fmt.Sprintf("s%d-%d", s, i)
				p, epoch := l.leader()
				if p == nil {
					time.Sleep(5 * time.Millisecond) // no leader yet
					continue
				}
				res, err := l.apply(ctx, p, sendCmd(&raftbusv1.Message{MessageId: id, Body: []byte(id)}))
				switch partition.ReasonOf(err) {
				case raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED:
					if err != nil {
						if ctx.Err() == nil {
							l.t.Errorf("send %s: %v", id, err)
						}
						return
					}
					l.mu.RLock()
					if l.epoch == epoch {
						l.h.mu.Lock()
						l.h.acked[id] = res.GetSend().Messages[0].SequenceNumber
						l.h.mu.Unlock()
						l.acked <- struct{}{}
					}
					l.mu.RUnlock()
				case raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
					// May or may not be in the log; not counted as acked.
				default:
					time.Sleep(5 * time.Millisecond) // NOT_LEADER, busy: retry
					continue
				}
				i++
			}
		}()
	}
}

// startReceiver starts a receiver that completes messages until it has
// completed enough (until ctx ends when enough is 0). A message whose
// completion was acknowledged must never be delivered again.
func (l *clientLoad) startReceiver(ctx context.Context, enough int) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			p, _ := l.leader()
			if p == nil {
				time.Sleep(5 * time.Millisecond) // no leader yet
				continue
			}
			msgs, err := p.Receive(ctx, lockCmd(8), 20*time.Millisecond)
			if err != nil {
				continue
			}
			for _, m := range msgs {
				id := m.Message.MessageId
				_, epoch := l.leader()
				_, err := l.apply(ctx, p, completeCmd(m.LockToken))
				l.mu.RLock()
				l.h.mu.Lock()
				if _, done := l.h.completed[id]; done {
					l.t.Errorf("message %s (seq %d) delivered again after its completion was acknowledged", id, m.SequenceNumber)
				}
				switch {
				case err == nil && l.epoch == epoch:
					l.h.completed[id] = m.SequenceNumber
				case err == nil, partition.ReasonOf(err) == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
					l.h.maybeCompleted[id] = m.SequenceNumber
				}
				done := enough > 0 && len(l.h.completed) >= enough
				l.h.mu.Unlock()
				l.mu.RUnlock()
				if done {
					return
				}
			}
		}
	}()
}

// waitAcks waits for n more sends to be acknowledged.
func (l *clientLoad) waitAcks(n int) {
	l.t.Helper()
	for range n {
		select {
		case <-l.acked:
		case <-time.After(30 * time.Second):
			l.t.Fatal("no send acknowledged for 30 s")
		}
	}
}

// TestLeaderCrashLosesNothingAcknowledged kills the leader while senders
// stream messages and a receiver completes them, then checks the new
// leader's state against what clients were told.
func TestLeaderCrashLosesNothingAcknowledged(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	configure(t, c.replicas[c.leader()], nil)
	load := newClientLoad(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	load.startSenders(ctx, 4, 150)
	load.startReceiver(ctx, 200)

	load.waitAcks(100)
	load.disrupt(func() {
		for i, p := range c.replicas {
			if p != nil && p.IsLeader() {
				c.kill(i)
			}
		}
	})
	load.wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the clients did not finish within 30 s")
	}
	if t.Failed() {
		return
	}

	h := load.h
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
