// Package history records what the clients of a failover test did and what
// came of it, one JSON object per line, so that a checker can judge the run
// afterwards and a failed run can be read by a person.
//
// Every operation is written once, when it has finished, with its start and
// end times: an operation whose acknowledgement arrived before another one
// started really did happen before it, and only such pairs are ordered by
// the checker. Times are nanoseconds since the recorder was created, on the
// test machine's monotonic clock; the broker's clock never enters into it.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

const (
	// Send is one message sent; Seq and Partition are set when acknowledged.
	Send Kind = "send"
	// Schedule is one message scheduled for ScheduledFor; Seq is the
	// schedule number (the message gets another when it activates).
	Schedule Kind = "schedule"
	// Cancel cancels the scheduled message Seq (the schedule number).
	Cancel Kind = "cancel"
	// Receive is one receive call; Messages are what it got.
	Receive Kind = "receive"
	// Complete, Abandon and DeadLetter settle the delivery of MessageID.
	Complete   Kind = "complete"
	Abandon    Kind = "abandon"
	DeadLetter Kind = "deadletter"
	// Drain is the final read of everything left in an entity (or its
	// dead-letter sub-queue when DLQ is set), after the faults stopped.
	Drain Kind = "drain"
	// Fault is a fault the nemesis injected (or healed): Fault names it.
	Fault Kind = "fault"
)

// Outcome is how an operation ended, from the client's point of view.
type Outcome string

const (
	// OK: acknowledged by the broker.
	OK Outcome = "ok"
	// Fail: the broker said it did not happen.
	Fail Outcome = "fail"
	// Unknown: no answer, or the broker could not tell (a timeout, a
	// connection lost, OUTCOME_UNKNOWN): it may or may not have happened.
	Unknown Outcome = "unknown"
)

// Delivery is one message as a receive (or drain) returned it.
type Delivery struct {
	MessageID     string `json:"id"`
	Seq           int64  `json:"seq"`
	Partition     uint32 `json:"part"`
	SessionID     string `json:"session,omitempty"`
	DeliveryCount int32  `json:"deliveries,omitempty"`
	// Enqueued is the broker's EnqueuedTimeUtc, Unix milliseconds.
	Enqueued int64 `json:"enqueued,omitempty"`
}

// Op is one finished operation.
type Op struct {
	Kind    Kind    `json:"kind"`
	Process int     `json:"proc"`
	Entity  string  `json:"entity,omitempty"`
	Start   int64   `json:"start"`
	End     int64   `json:"end"`
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`

	// Send, Schedule, Cancel, settlements: the message.
	MessageID string `json:"id,omitempty"`
	SessionID string `json:"session,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
	Partition uint32 `json:"part,omitempty"`
	// Schedule: when the message is due, on the recorder's clock (see
	// Recorder.Since).
	ScheduledFor int64 `json:"scheduled_for,omitempty"`
	// Send: the broker recognised the MessageId as a duplicate (Seq is 0).
	Duplicate bool `json:"duplicate,omitempty"`

	// Receive and Drain.
	Messages []Delivery `json:"messages,omitempty"`
	DLQ      bool       `json:"dlq,omitempty"`

	// Fault: what was done, e.g. "kill n2", "heal".
	Fault string `json:"fault,omitempty"`
}

// Recorder appends operations to a history. It is safe for concurrent use.
type Recorder struct {
	origin time.Time
	mu     sync.Mutex
	w      *bufio.Writer
	f      *os.File
	err    error
}

// Create starts a history file at path (truncating it).
func Create(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Recorder{origin: time.Now(), w: bufio.NewWriter(f), f: f}, nil
}

// Now is the recorder's clock: nanoseconds since it was created.
func (r *Recorder) Now() int64 { return int64(time.Since(r.origin)) }

// Since converts a wall-clock time (such as the ScheduledEnqueueTime given
// to the broker) to the recorder's clock.
func (r *Recorder) Since(t time.Time) int64 { return int64(t.Sub(r.origin)) }

// Record appends op. A write error is kept and returned by Close.
func (r *Recorder) Record(op Op) {
	b, err := json.Marshal(op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	r.err = err
}

// Close flushes the history and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.err
	if ferr := r.w.Flush(); err == nil {
		err = ferr
	}
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// Read parses a history written by a Recorder.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return ops, nil
}

// ReadFile parses the history at path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}
