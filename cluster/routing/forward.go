package routing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftbus/raftbus/cluster/apierror"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// MaxAttempts bounds how many nodes one request is tried at: the cached
// or hinted leader, and the replicas after it when a node is down.
const MaxAttempts = 4

// Repeat says what Forward may do once a forwarded call's outcome is
// unknown (the connection to the leader broke after the request left, or
// the leader lost leadership while replicating it): whether the request
// may be sent again.
type Repeat int

const (
	// Once: a change that must not be applied twice (a send without
	// duplicate detection, accepting a session). An unknown outcome goes
	// to the caller, who decides.
	Once Repeat = iota
	// Idempotent: a read, or a change whose repeat changes nothing more
	// than the first (a receive with its receive id, cancelling scheduled
	// messages, a send that duplicate detection makes harmless, a change
	// by lock token, whose repeat finds the lock gone if the first took
	// effect). Whatever a repeat then fails with, the caller is told the
	// truth: the outcome is unknown.
	Idempotent
)

// Forward serves a call for the partition whose Raft group is group at
// its leader, trying addrs (best first), following NOT_LEADER hints and
// skipping nodes that are down, at most MaxAttempts times. A request is
// sent again only when it certainly did not take effect (the node could
// not be reached or said it did not lead), or when rep says a repeat is
// safe. The leader that answered is remembered in leaders.
func Forward(ctx context.Context, peers *Peers, leaders *Leaders, group string, addrs []string, rep Repeat,
	call func(ctx context.Context, conn grpc.ClientConnInterface) error,
) error {
	var lastErr, unknown *apierror.Error
	var trail []string
	// fail is the failure the caller hears: err, with what each attempt
	// met when there were several, so that the client's error tells how
	// the forwarding went.
	fail := func(err *apierror.Error) error {
		if len(trail) < 2 {
			return err
		}
		e := *err
		e.Message = fmt.Sprintf("%s [forwarded: %s]", e.Message, strings.Join(trail, "; "))
		return &e
	}
	queue := addrs
	for attempt := 0; attempt < MaxAttempts && len(queue) > 0; attempt++ {
		addr := queue[0]
		queue = queue[1:]
		callCtx := ctx
		if unknown != nil {
			callCtx = context.WithValue(ctx, afterUnknownKey{}, true)
		}
		err := peers.Call(callCtx, addr, call)
		if err == nil {
			leaders.Set(group, addr)
			return nil
		}
		lastErr = apierror.From(err)
		trail = append(trail, fmt.Sprintf("%d) %s: %s: %s", attempt+1, addr, strings.TrimPrefix(lastErr.Reason.String(), "ERROR_REASON_"), truncate(lastErr.Message)))
		switch lastErr.Reason {
		case raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER:
			if h := lastErr.Leader.GetAddress(); h != "" && h != addr {
				leaders.Set(group, h)
				queue = append([]string{h}, queue...)
			}
		case raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY:
			// The node is down or has no leader: nothing was done; try
			// another replica.
		case raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN:
			unknown = lastErr
			if rep == Once || ctx.Err() != nil {
				return fail(lastErr)
			}
			// Safe to repeat: ask the same node again first (the
			// connection may just have broken), then the others.
			queue = append([]string{addr}, queue...)
		default:
			if unknown != nil {
				// An earlier attempt may have taken effect: a repeated
				// settlement that finds its lock gone most likely found it
				// gone because the first settled it, and no failure of a
				// repeat says that nothing happened.
				return fail(unknown)
			}
			return fail(lastErr)
		}
	}
	leaders.Set(group, "")
	if unknown != nil {
		// An earlier attempt may have taken effect.
		return fail(unknown)
	}
	if lastErr == nil {
		lastErr = apierror.Busy("partition %s has no reachable leader", group)
	}
	return fail(lastErr)
}

type afterUnknownKey struct{}

// AfterUnknown reports whether the forwarded call made with ctx repeats
// a request whose earlier attempt may have taken effect. Forward itself
// then reports any failure as an unknown outcome; a call whose answer
// carries a failure per item (a batch of sends or settlements, answered
// as a whole) must do the same for its items: see ItemFailure.
func AfterUnknown(ctx context.Context) bool {
	v, _ := ctx.Value(afterUnknownKey{}).(bool)
	return v
}

// ItemFailure is the failure of one item of a forwarded batch (nil when
// it succeeded) as the caller must hear it. A node that did not lead the
// partition answers each item NOT_LEADER (or SERVER_BUSY) in a batch it
// answers as a whole, which says the item was not done there; after an
// earlier attempt whose outcome is unknown (AfterUnknown) it does not say
// the item was not done at all, so it becomes OUTCOME_UNKNOWN. Without
// this a settlement that an earlier attempt got committed was reported as
// failed (NOT_LEADER) by a later attempt at a follower.
func ItemFailure(ctx context.Context, info *raftbusv1.ErrorInfo) *raftbusv1.ErrorInfo {
	if info == nil || !AfterUnknown(ctx) {
		return info
	}
	switch info.GetReason() {
	case raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, raftbusv1.ErrorReason_ERROR_REASON_SERVER_BUSY:
		return apierror.Info(apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
			"an earlier attempt may have taken effect; this one was not served: %s", info.GetMessage()))
	}
	return info
}

// maxAttemptText bounds what a trail keeps of one attempt's failure.
const maxAttemptText = 200

func truncate(s string) string {
	if len(s) > maxAttemptText {
		return s[:maxAttemptText] + "..."
	}
	return s
}

// ForwardError classifies a failed forwarded call that the node called
// did not answer itself (a gRPC status without ErrorInfo): a call that
// never reached it did nothing, one that may have is of unknown outcome,
// whether its connection broke or its stream failed otherwise after the
// node may have handled it (reset, an answer that could not be read).
func ForwardError(err error, addr string, maybeSent bool) error {
	st, ok := status.FromError(err)
	if !ok || apierror.HasInfo(st) {
		return err
	}
	switch {
	case st.Code() == codes.Unavailable && !maybeSent:
		return apierror.Busy("node %s is unreachable: %s", addr, st.Message())
	case st.Code() == codes.Unavailable:
		return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
			"the connection to node %s broke after the request was sent (%s); it may or may not have taken effect", addr, st.Message())
	case garbled(st.Code()) && maybeSent:
		return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN,
			"the call to node %s failed after it may have reached it (%s: %s); it may or may not have taken effect", addr, st.Code(), st.Message())
	}
	return err
}

// garbled tells the codes of a failure that no node answered (no
// ErrorInfo: every answer of a raftbus node has one) which can come after
// the node handled the call: its stream reset (INTERNAL_ERROR and other
// HTTP/2 errors), or an answer that could not be read.
func garbled(c codes.Code) bool {
	return c == codes.Internal || c == codes.Unknown || c == codes.DataLoss
}

// Backoff spaces the attempts of a node waiting for another part of the
// cluster (a join, partitions electing leaders).
func Backoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 6), 2*time.Second)
}
