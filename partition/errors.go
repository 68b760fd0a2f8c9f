package partition

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Error is a failure with a stable reason code. The engine's rejections and
// the partition's own failures (not leader, outcome unknown) are all of this
// type; the API layer turns it into a gRPC status.
type Error struct {
	Reason  raftbusv1.ErrorReason
	Message string
	// Retryable reports whether repeating the operation can succeed.
	Retryable bool
	// LeaderID and LeaderAddress name the current leader for
	// ERROR_REASON_NOT_LEADER when it is known.
	LeaderID      string
	LeaderAddress string
}

func (e *Error) Error() string { return e.Message }

// newError builds an Error whose retryability follows from its reason.
func newError(reason raftbusv1.ErrorReason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Retryable: reason.Retryable()}
}

// ReasonOf returns the reason code of err, or ERROR_REASON_UNSPECIFIED when
// err is not an *Error.
func ReasonOf(err error) raftbusv1.ErrorReason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return raftbusv1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

// proposalError classifies the error of a Raft apply future. What matters to
// a caller is whether the command may have been committed: a command that
// never entered the leader's log can be retried safely; one that did may
// still commit under the next leader.
func (p *Partition) proposalError(err error) *Error {
	p.noteTransferRefusal(err)
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return p.notLeader()
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Raft turns proposals away during a transfer before they enter the
		// log, so this one was not applied.
		return newError(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY,
			"partition %s: leadership is moving to another node; the operation was not applied", p.name)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return newError(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY,
			"partition %s: timed out handing the operation to raft; it was not applied", p.name)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrAbortedByRestore):
		e := newError(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
			"partition %s: leadership changed before the operation was known to commit (%v); it may or may not have taken effect", p.name, err)
		e.LeaderAddress, e.LeaderID = p.leader()
		return e
	default:
		return newError(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
			"partition %s: replicate operation: %v; it may or may not have taken effect", p.name, err)
	}
}

// notLeader is the error for an operation that reached a replica which does
// not lead the partition.
func (p *Partition) notLeader() *Error {
	addr, id := p.leader()
	msg := fmt.Sprintf("partition %s: this node is not the leader", p.name)
	reason := raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER
	if id == "" {
		msg = fmt.Sprintf("partition %s: no leader is elected yet", p.name)
		reason = raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY
	} else {
		msg += fmt.Sprintf("; the leader is %s at %s", id, addr)
	}
	return &Error{Reason: reason, Message: msg, Retryable: true, LeaderID: id, LeaderAddress: addr}
}

// closing is the error for an operation that reached a replica as it
// closes, before it was handed to Raft.
func (p *Partition) closing() *Error {
	return newError(raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY,
		"partition %s: the replica is closing; the operation was not applied", p.name)
}

func (p *Partition) leader() (addr, id string) {
	a, i := p.raft.LeaderWithID()
	return string(a), string(i)
}

// NotLeader is the error for an operation on a replica that does not lead:
// NOT_LEADER naming the leader when one is known, SERVER_BUSY otherwise.
func (p *Partition) NotLeader() error { return p.notLeader() }
