package partition_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// stallingLogs is a Raft log store whose writes can be made to hang, as
// on a stalled disk.
type stallingLogs struct {
	raft.LogStore
	mu      sync.Mutex
	stalled chan struct{} // while set, writes wait for it to close
	entered chan struct{} // closed when a write starts waiting
}

// stall makes the next writes hang until release is called, and returns
// a channel closed once one of them does.
func (s *stallingLogs) stall() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled, s.entered = make(chan struct{}), make(chan struct{})
	stalled := s.stalled
	var once sync.Once
	return s.entered, func() {
		once.Do(func() {
			s.mu.Lock()
			s.stalled = nil
			s.mu.Unlock()
			close(stalled)
		})
	}
}

func (s *stallingLogs) wait() {
	s.mu.Lock()
	stalled, entered := s.stalled, s.entered
	if stalled != nil {
		select {
		case <-entered:
		default:
			close(entered)
		}
	}
	s.mu.Unlock()
	if stalled != nil {
		<-stalled
	}
}

func (s *stallingLogs) StoreLog(l *raft.Log) error {
	s.wait()
	return s.LogStore.StoreLog(l)
}

func (s *stallingLogs) StoreLogs(logs []*raft.Log) error {
	s.wait()
	return s.LogStore.StoreLogs(logs)
}

// TestReadOnAStalledLeaderEndsWithItsContext stalls the disk under a
// leader, so that Raft's main loop hangs writing an entry, and reads: the
// read cannot confirm leadership, and must give up when its context ends
// instead of hanging with Raft.
func TestReadOnAStalledLeaderEndsWithItsContext(t *testing.T) {
	logs := &stallingLogs{}
	p := openAlone(t, func(c *partition.Config) {
		partition.WrapLogStore(c, func(s raft.LogStore) raft.LogStore {
			logs.LogStore = s
			return logs
		})
	})
	entered, release := logs.stall()
	// Runs before the partition is closed (cleanups run last first).
	t.Cleanup(release)

	sent := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("x")}))
		sent <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader wrote no entry to its log")
	}

	// More reads than the 64 leadership checks Raft queues for its main
	// loop: asking for one more blocks while that loop is stuck.
	const reads = 100
	const readFor = 200 * time.Millisecond
	results := make(chan error, reads)
	var ran atomic.Int32
	for range reads {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), readFor)
			defer cancel()
			results <- p.Read(ctx, func(*engine.Engine) { ran.Add(1) })
		}()
	}
	timeout := time.After(readFor + 5*time.Second)
	for i := range reads {
		select {
		case err := <-results:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("read on a stalled leader: %v, want its context's deadline", err)
			}
		case <-timeout:
			t.Fatalf("%d of %d reads on a stalled leader did not return within 5 s of their context's end", reads-i, reads)
		}
	}
	if n := ran.Load(); n > 0 {
		t.Errorf("%d reads on a stalled leader ran against its state", n)
	}

	release()
	if err := <-sent; err != nil {
		t.Errorf("send once the disk is back: %v", err)
	}
	if err := p.Read(context.Background(), func(*engine.Engine) {}); err != nil {
		t.Errorf("read once the disk is back: %v", err)
	}
}

// TestReadWaitsForTheStateMachineToApplyTheReadIndex holds the state
// machine while entries commit: Raft has handed them over (its
// AppliedIndex covers them) but they are not applied. A read must wait for
// them, not read the state without them.
func TestReadWaitsForTheStateMachineToApplyTheReadIndex(t *testing.T) {
	// An entry each, all proposed at once.
	p := openAlone(t, func(c *partition.Config) { c.MaxCommandsPerEntry, c.MaxEntriesInFlight = 1, 64 })
	releaseFSM := holdStateMachine(t, p)

	const sends = 20
	base := p.Info().CommitIndex
	var wg sync.WaitGroup
	errs := make(chan error, sends)
	for range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Apply(context.Background(), sendCmd(&raftbusv1.Message{Body: []byte("x")}))
			errs <- err
		}()
	}
	await.Until(t, 10*time.Second, "the sends to commit and be handed to the held state machine", func() bool {
		info := p.Info()
		return info.CommitIndex >= base+sends && info.AppliedIndex >= info.CommitIndex
	})

	const readFor = 200 * time.Millisecond
	read := make(chan error, 1)
	var seen int64 = -1
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), readFor)
		defer cancel()
		read <- p.Read(ctx, func(e *engine.Engine) { seen = activeCount(t, e) })
	}()
	select {
	case err := <-read:
		if !errors.Is(err, context.DeadlineExceeded) || seen >= 0 {
			t.Errorf("read while committed entries wait for the state machine: %v, saw %d messages; want its context's deadline", err, seen)
		}
	case <-time.After(readFor + 5*time.Second):
		t.Errorf("read did not return within 5 s of its context's end")
	}

	releaseFSM()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if err := p.Read(context.Background(), func(e *engine.Engine) { seen = activeCount(t, e) }); err != nil || seen != sends {
		t.Fatalf("read after the state machine caught up: %v, %d messages; want %d", err, seen, sends)
	}
}

func activeCount(t *testing.T, e *engine.Engine) int64 {
	props, err := e.RuntimeProperties(queue)
	if err != nil {
		t.Errorf("runtime properties: %v", err)
		return -1
	}
	return props.GetActiveMessageCount()
}
