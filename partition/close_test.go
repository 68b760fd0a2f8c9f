package partition_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/partition"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/raftlog"
)

// closeBound is how long Close may take. Nothing in it waits for more than
// a shutdown of Raft, which is quick with the in-memory transport.
const closeBound = 10 * time.Second

// holdStateMachine keeps p's state machine from applying anything until
// the returned release is called (or the test ends): committed entries
// queue up for it meanwhile.
func holdStateMachine(t *testing.T, p *partition.Partition) (release func()) {
	held, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	go p.ReadApplied(func(*engine.Engine) {
		close(held)
		<-unblock
	})
	<-held
	return release
}

// openAlone opens a single-replica partition, ready to serve, and closes it
// at the end of the test unless the test did, never waiting past
// closeBound (a hung Close fails the test rather than hanging it).
func openAlone(t *testing.T, tune func(*partition.Config)) *partition.Partition {
	t.Helper()
	_, tr := raft.NewInmemTransport("solo")
	dir := t.TempDir()
	log, err := raftlog.Open(filepath.Join(dir, "log"), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the partition's Close below.
	t.Cleanup(func() { log.Close() })
	g, err := log.Group("orders/0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := partition.Config{
		Name: "orders/0", NodeID: "solo", Dir: filepath.Join(dir, "snapshots"), Transport: tr,
		Log: g, Stable: g,
		Bootstrap:        []raft.Server{{ID: "solo", Address: "solo"}},
		HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond,
	}
	if tune != nil {
		tune(&cfg)
	}
	p, err := partition.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, p, closeBound) })
	await.Until(t, 10*time.Second, "the replica to lead", func() bool {
		return p.Read(context.Background(), func(*engine.Engine) {}) == nil
	})
	configure(t, p, nil)
	return p
}

// closeWithin closes p and fails the test when that takes longer than d.
func closeWithin(t *testing.T, p *partition.Partition, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(d):
		t.Errorf("Close did not return within %v", d)
	}
}

// proposeUntilClosed keeps senders proposing until the partition stops
// taking proposals. Every caller must get an answer: the results are
// checked for reasons a caller may see while the partition closes.
func proposeUntilClosed(t *testing.T, p *partition.Partition, senders int) (wait func()) {
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*closeBound)
				_, err := p.Apply(ctx, sendCmd(&raftbusv1.Message{Body: []byte("payload")}))
				cancel()
				if err == nil {
					continue
				}
				switch partition.ReasonOf(err) {
				case raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY,
					raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
				default:
					if errors.Is(err, context.DeadlineExceeded) {
						err = errors.New("a proposal got no answer while the partition closed")
					}
					errs <- err
				}
				return
			}
		}()
	}
	return func() {
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestCloseEndsWhenRaftDropsCommittedEntries closes a leader while its
// state machine is behind on committed entries. Raft drops the entries
// queued for the state machine when it shuts down and never answers their
// futures (hashicorp/raft#498); Close must end all the same, and the
// callers waiting on those entries learn that the outcome is unknown.
func TestCloseEndsWhenRaftDropsCommittedEntries(t *testing.T) {
	for range 5 {
		// One command per entry, all proposed at once: each is committed,
		// and queued for the state machine, on its own.
		p := openAlone(t, func(c *partition.Config) { c.MaxCommandsPerEntry, c.MaxEntriesInFlight = 1, 64 })
		wait := proposeUntilClosed(t, p, 16)
		// Hold the state machine so that committed entries queue up for it.
		releaseFSM := holdStateMachine(t, p)
		// From the held state machine's index, not raft's AppliedIndex:
		// raft counts an entry applied once it is queued for the state
		// machine, so that index keeps up with the commits while the
		// state machine is held, and once every sender waits for an
		// entry queued behind it nothing more would commit.
		target := p.StateAppliedIndex() + 8
		await.Until(t, 10*time.Second, "entries to commit behind the held state machine", func() bool {
			return p.Info().CommitIndex >= target
		})
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			closeWithin(t, p, closeBound)
		}()
		await.Until(t, 10*time.Second, "raft to begin its shutdown", func() bool {
			return p.Raft().State() == raft.Shutdown
		})
		releaseFSM()
		<-closed
		wait()
		if t.Failed() {
			return
		}
	}
}

// TestCloseUnderProposalsEnds closes leaders again and again while callers
// keep proposing.
func TestCloseUnderProposalsEnds(t *testing.T) {
	for range 20 {
		p := openAlone(t, nil)
		wait := proposeUntilClosed(t, p, 8)
		await.Until(t, 10*time.Second, "proposals to commit", func() bool { return p.Info().AppliedIndex > 50 })
		closeWithin(t, p, closeBound)
		wait()
		if t.Failed() {
			return
		}
	}
}
