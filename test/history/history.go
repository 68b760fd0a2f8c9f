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
	"slices"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

const (
	// Send is one message sent; Seq, Partition and Enqueued are set when
	// acknowledged.
	Send Kind = "send"
	// Schedule is one message scheduled for ScheduledFor; Seq is the
	// schedule number (the message gets another when it activates).
	Schedule Kind = "schedule"
	// Cancel cancels the scheduled message Seq (the schedule number).
	Cancel Kind = "cancel"
	// Receive is one receive call (or, with Deferred, one receive of
	// deferred messages by sequence number); Messages are what it got.
	Receive Kind = "receive"
	// Complete, Abandon, DeadLetter and Defer settle the delivery of
	// MessageID whose lock is LockToken.
	Complete   Kind = "complete"
	Abandon    Kind = "abandon"
	DeadLetter Kind = "deadletter"
	Defer      Kind = "defer"
	// RenewLock extends the lock LockToken; LockedUntil is its new end.
	RenewLock Kind = "renew"
	// Accept locks a session: SessionID, LockedUntil, and Lock, the id the
	// workload gives this hold so that what it does under it names it.
	Accept Kind = "accept"
	// RenewSession extends the session hold Lock to LockedUntil.
	RenewSession Kind = "renew-session"
	// CloseSession releases the session hold Lock.
	CloseSession Kind = "close-session"
	// GetState and SetState read and write the State of SessionID under
	// the hold Lock.
	GetState Kind = "get-state"
	SetState Kind = "set-state"
	// Change creates, changes or deletes an entity or a rule: Change names
	// what was done to Entity, Settings are what the entity is declared to
	// be afterwards (creations and updates). The entities a run starts
	// with are recorded as changes too.
	Change Kind = "change"
	// Drain is the final read of everything left in an entity (or its
	// dead-letter sub-queue when DLQ is set), after the faults stopped.
	Drain Kind = "drain"
	// Fault is a fault the nemesis injected or, with Heal, healed: Fault
	// names it, its first word the kind of fault.
	Fault Kind = "fault"
	// Digest is a replica's state digest once the cluster settled: Entity,
	// Partition, Node, its Applied index and the Digest (hex).
	Digest Kind = "digest"
)

// Changes an entity goes through (Op.Change).
const (
	CreateEntity = "create"
	UpdateEntity = "update"
	DeleteEntity = "delete"
	// CreateRule and DeleteRule change a subscription's rules: afterwards
	// which messages it gets is no longer known from its Settings.
	CreateRule = "create-rule"
	DeleteRule = "delete-rule"
)

// ReceiveAndDelete is the Mode of a receive that removes what it gets
// (the default, empty, is PeekLock).
const ReceiveAndDelete = "receive-and-delete"

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

// Delivery is one message as a receive (or drain) returned it. Times of
// the broker's (LockedUntil, Expires) are converted to the recorder's
// clock with Recorder.Since.
type Delivery struct {
	// MessageID is the workload's id of the message: its MessageId, or its
	// body when it was sent without one.
	MessageID     string `json:"id"`
	Seq           int64  `json:"seq"`
	Partition     uint32 `json:"part"`
	SessionID     string `json:"session,omitempty"`
	DeliveryCount int32  `json:"deliveries,omitempty"`
	// Enqueued is the broker's EnqueuedTimeUtc, Unix milliseconds.
	Enqueued int64 `json:"enqueued,omitempty"`
	// LockToken (hex) and LockedUntil of a PeekLock delivery.
	LockToken   string `json:"lock,omitempty"`
	LockedUntil int64  `json:"locked_until,omitempty"`
	// Expires is when the message's time to live ends (0: never).
	Expires int64 `json:"expires,omitempty"`
	// State, in drains: "active", "deferred" or "scheduled".
	State string `json:"state,omitempty"`
	// Reason why a message is in the dead-letter sub-queue.
	Reason string `json:"reason,omitempty"`
}

// Settings are what the checker needs to know of an entity.
type Settings struct {
	RequiresSession        bool  `json:"sessions,omitempty"`
	DuplicateDetection     bool  `json:"dedup,omitempty"`
	DuplicateWindow        int64 `json:"dedup_window,omitempty"`
	LockDuration           int64 `json:"lock_duration,omitempty"`
	MaxDeliveryCount       int32 `json:"max_deliveries,omitempty"`
	DefaultTTL             int64 `json:"ttl,omitempty"`
	DeadLetterOnExpiration bool  `json:"dead_letter_on_expiry,omitempty"`
	// Topic is the topic a subscription copies from.
	Topic string `json:"topic,omitempty"`
	// Filter tells which of the topic's messages a subscription gets.
	Filter *Filter `json:"filter,omitempty"`
	// ForwardTo is the queue a queue forwards every message to: the
	// messages sent to it are found there (with numbers of that queue's),
	// each once.
	ForwardTo string `json:"forward_to,omitempty"`
}

// Filter is a subscription's rules as the checker evaluates them: a
// message matches when one rule does (no rules: nothing matches).
type Filter struct {
	Rules []Rule `json:"rules"`
}

// Rule matches when every condition holds (no conditions: everything).
type Rule []Condition

// Condition holds when the message's Props[Property] is one of Values.
type Condition struct {
	Property string   `json:"property"`
	Values   []string `json:"values"`
}

// Matches reports whether a message with props passes the filter.
func (f *Filter) Matches(props map[string]string) bool {
	for _, r := range f.Rules {
		if r.matches(props) {
			return true
		}
	}
	return false
}

func (r Rule) matches(props map[string]string) bool {
	for _, c := range r {
		v, ok := props[c.Property]
		if !ok || !slices.Contains(c.Values, v) {
			return false
		}
	}
	return true
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
	// Code is the broker's reason for a failure (e.g. "NOT_FOUND").
	Code string `json:"code,omitempty"`

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
	// Send: the message went without a MessageId (MessageID is its body).
	Anonymous bool `json:"anonymous,omitempty"`
	// Send: its time to live (0: the entity's default), and the
	// properties subscription filters look at.
	TTL   int64             `json:"ttl,omitempty"`
	Props map[string]string `json:"props,omitempty"`
	// Send: the broker's EnqueuedTimeUtc, Unix milliseconds.
	Enqueued int64 `json:"enqueued,omitempty"`

	// Receive and Drain.
	Messages []Delivery `json:"messages,omitempty"`
	DLQ      bool       `json:"dlq,omitempty"`
	// Receive: Mode (ReceiveAndDelete or PeekLock), and whether it
	// received deferred messages.
	Mode     string `json:"mode,omitempty"`
	Deferred bool   `json:"deferred,omitempty"`

	// Settlements and RenewLock: the lock they act on.
	LockToken string `json:"lock,omitempty"`
	// Session operations (and receives and settlements under a session):
	// the session hold, as Accept named it.
	Lock string `json:"hold,omitempty"`
	// RenewLock, Accept, RenewSession: when the lock ends, on the
	// recorder's clock.
	LockedUntil int64 `json:"locked_until,omitempty"`
	// GetState, SetState.
	State string `json:"state,omitempty"`

	// Change: what was done, and the entity's settings afterwards.
	Change   string    `json:"change,omitempty"`
	Settings *Settings `json:"settings,omitempty"`

	// Fault: what was done, e.g. "kill n2"; Heal marks the end of one.
	Fault string `json:"fault,omitempty"`
	Heal  bool   `json:"heal,omitempty"`

	// Digest: the node asked, its replica's applied index and digest.
	Node    string `json:"node,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
	Digest  string `json:"digest,omitempty"`
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
