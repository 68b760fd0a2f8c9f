package service

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/routing"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A receive across the partitions of an entity looks by node, not by
// partition: first where the oldest message waits, as this node's
// replicas see it (at the partitions this node leads, or at another node
// that leads some, which looks at its own, forwarding refused), unless
// this node's own oldest came at most LocalLead later; where nothing is
// seen waiting, here first. When none has anything it waits on
// every leader at once, taking nothing
// (AwaitMessages: each node waits on all its partitions at once), and
// looks again as soon as one has a message. Asking partition by
// partition, 50 ms each in turn, had left a message sent to an idle
// 16-partition queue waiting up to most of a second.
//
// The first node with messages ends the search, and hands out what its
// partitions hold within the receive's bounds, each partition keeping a
// receipt under the receive id (see Messaging.replay, which reads them all).
// Only the waiting is done everywhere at once, and waiting takes nothing.

// receiveAcross receives from whichever partition of e has messages first,
// waiting up to wait. A node asked by another (forwarding refused) looks
// only at the partitions it leads.
func (s *Messaging) receiveAcross(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	if routing.Forwarded(ctx) {
		return s.receiveLocal(ctx, e, lock, wait)
	}
	if len(e.GetPartitions()) == 1 {
		return s.receiveFrom(ctx, e, 0, lock, wait)
	}
	look := func(src source, wait time.Duration) ([]*raftbusv1.ReceivedMessage, bool, error) {
		var msgs []*raftbusv1.ReceivedMessage
		var err error
		switch {
		case src.local:
			msgs, err = s.receiveLocal(ctx, e, lock, wait)
		case src.addr != "":
			msgs, err = s.receiveAt(ctx, src.addr, lock, wait)
		default:
			msgs, err = s.receiveFrom(ctx, e, src.id, lock, wait)
		}
		return msgs, len(msgs) > 0, err
	}
	deadline := time.Now().Add(wait)
	for {
		srcs := s.sources(e, lock.GetEntityPath(), lock.GetSubQueue())
		msgs, err := firstAcross(srcs, 0, look)
		if err != nil || len(msgs) > 0 || !time.Now().Before(deadline) {
			return msgs, err
		}
		if !s.awaitAny(ctx, e, lock, srcs, time.Until(deadline)) {
			// Nothing could be waited on (every leader failed to answer):
			// wait at each in turn, which reports why none serves.
			return firstAcross(srcs, time.Until(deadline), look)
		}
	}
}

// source is where a receive across partitions looks: the partitions this
// node leads (local), a node that leads some of the others (addr), or one
// partition (id) of which this node holds no replica, reached through the
// routing cache and its NOT_LEADER hints (see Node.Route).
type source struct {
	local bool
	addr  string
	id    uint32
}

// sources lists where a receive across e's partitions looks, each once:
// this node (the partitions it leads), each other leader, and on its own
// each partition whose leader is not known here. Sources holding the
// oldest messages waiting come first, as this node's replicas see them (a
// follower's view of a partition trails its leader a little), but this
// node goes first while its oldest message has waited no more than
// LocalLead less than the oldest anywhere; the others follow in
// pollOrder: this node, then each other leader, then the partitions asked
// on their own. Looking here first whatever waited elsewhere let the
// partitions of a node that fewer receivers reached fall behind: under
// load their messages waited seconds. Going elsewhere for the oldest
// however little sooner it came sent most receives under load through
// another node, each message crossing one more hop.
func (s *Messaging) sources(e *clusterv1.Entity, path string, sub raftbusv1.SubQueue) []source {
	waiting, ages, rest := s.byOldest(e, path, sub, s.pollOrder(e))
	var out, alone []source
	local := false
	for k, id := range waiting {
		if ages[k]-ages[0] > LocalLead.Milliseconds() {
			break
		}
		if r := s.node.Replica(e, id); r != nil && r.IsLeader() {
			local = true
			out = append(out, source{local: true})
			break
		}
	}
	seen := map[string]bool{}
	for k, id := range append(waiting, rest...) {
		r := s.node.Replica(e, id)
		if r != nil && r.IsLeader() {
			if !local {
				local = true
				out = append(out, source{local: true})
			}
			continue
		}
		var addr string
		if r != nil {
			addr, _ = r.Leader()
		}
		switch {
		case r == nil || addr == "" || addr == s.node.Addr():
			// No replica here, or no leader now: asked on its own, it
			// answers why.
			if k < len(waiting) {
				out = append(out, source{id: id})
			} else {
				alone = append(alone, source{id: id})
			}
		case !seen[addr]:
			seen[addr] = true
			out = append(out, source{addr: addr})
		}
	}
	return append(out, alone...)
}

// byOldest splits ids into those whose replica here sees a message
// waiting in the sub-queue of path, the oldest message first, with the
// enqueue times of those messages (Unix milliseconds), and the rest, in
// the order given.
func (s *Messaging) byOldest(e *clusterv1.Entity, path string, sub raftbusv1.SubQueue, ids []uint32) (waiting []uint32, ages []int64, rest []uint32) {
	type aged struct {
		id uint32
		ms int64
	}
	var seen []aged
	for _, id := range ids {
		if r := s.node.Replica(e, id); r != nil {
			if ms, ok := r.OldestAvailable(path, sub); ok {
				seen = append(seen, aged{id, ms})
				continue
			}
		}
		rest = append(rest, id)
	}
	slices.SortStableFunc(seen, func(a, b aged) int { return cmp.Compare(a.ms, b.ms) })
	for _, a := range seen {
		waiting = append(waiting, a.id)
		ages = append(ages, a.ms)
	}
	return waiting, ages, rest
}

// localOrder is the order in which a receive asks the partitions of e
// this node leads: those holding the oldest messages of the sub-queue of
// path first (see byOldest), then the rest in pollOrder.
func (s *Messaging) localOrder(e *clusterv1.Entity, path string, sub raftbusv1.SubQueue) []uint32 {
	var led []uint32
	for _, id := range s.pollOrder(e) {
		if r := s.node.Replica(e, id); r != nil && r.IsLeader() {
			led = append(led, id)
		}
	}
	waiting, _, rest := s.byOldest(e, path, sub, led)
	return append(waiting, rest...)
}

// awaitAny waits up to wait until one of srcs has a message for lock, at
// all of them at once, and reports false when none could be waited on.
// A partition reached on its own (no replica here) cannot be waited on:
// then the wait is cut to pollSlice, so that it is looked at again soon.
func (s *Messaging) awaitAny(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, srcs []source, wait time.Duration) bool {
	for _, src := range srcs {
		if !src.local && src.addr == "" {
			wait = min(wait, pollSlice)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the other waits end: they took nothing
	done := make(chan error, len(srcs))
	waiting := 0
	for _, src := range srcs {
		switch {
		case src.local:
			go func() {
				_, err := s.awaitLocal(ctx, e, lock.GetEntityPath(), lock.GetSubQueue(), wait)
				done <- err
			}()
		case src.addr != "":
			go func() {
				_, err := s.awaitAt(ctx, src.addr, lock, wait)
				done <- err
			}()
		default:
			continue // cannot be waited on: looked at again after wait
		}
		waiting++
	}
	if waiting == 0 {
		return false
	}
	for range waiting {
		if err := <-done; err == nil {
			return true // a message is there, or the wait passed
		}
	}
	return false
}

// awaitLocal waits up to wait until a partition of e this node leads has a
// message for the sub-queue of path, taking nothing.
func (s *Messaging) awaitLocal(ctx context.Context, e *clusterv1.Entity, path string, sub raftbusv1.SubQueue, wait time.Duration) (bool, error) {
	available := false
	order := func() []uint32 { return s.pollOrder(e) } // any will do: it takes nothing
	err := s.onLocalPartitions(ctx, e, order, wait, func(_ uint32, r Replica) (bool, error) {
		available = r.Available(path, sub)
		return available, nil
	})
	return available, err
}

// receiveLocal receives from the partitions of e this node leads, waiting
// up to wait on all of them at once until one has messages, and then
// gathers what the others hold (see gatherLocal).
func (s *Messaging) receiveLocal(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	var msgs []*raftbusv1.ReceivedMessage
	var first uint32
	order := func() []uint32 { return s.localOrder(e, lock.GetEntityPath(), lock.GetSubQueue()) }
	err := s.onLocalPartitions(ctx, e, order, wait, func(id uint32, r Replica) (bool, error) {
		var err error
		msgs, err = r.Receive(ctx, lock, 0)
		first = id
		return len(msgs) > 0, err
	})
	if err != nil || len(msgs) == 0 {
		return msgs, err
	}
	return s.gatherLocal(ctx, e, lock, first, msgs)
}

// gatherMinBytes is what must be left of a receive's byte bound for it to
// ask one more partition: more than the largest message, so that the
// partition hands out nothing beyond the bound (it hands out its first
// message whatever the bound).
const gatherMinBytes = 2 << 20

// gatherLocal adds to msgs, received from partition first, what the other
// partitions of e this node leads have available, under the same receive
// id and within what is left of the receive's bounds: a receiver of a
// quiet partitioned entity would otherwise get a message or two per
// receive, one partition at a time. Each partition keeps its receipt, and
// a replay reads every partition, so a repeat after an unknown outcome
// gets them all back; an unknown outcome here is the answer for that
// reason. A partition that fails otherwise handed out nothing and is
// passed over.
func (s *Messaging) gatherLocal(ctx context.Context, e *clusterv1.Entity, lock *enginev1.Lock, first uint32, msgs []*raftbusv1.ReceivedMessage) ([]*raftbusv1.ReceivedMessage, error) {
	left := int(lock.GetMaxMessages()) - len(msgs)
	bytes := lock.GetMaxBytes() - receivedSize(msgs)
	for _, id := range s.localOrder(e, lock.GetEntityPath(), lock.GetSubQueue()) {
		if left <= 0 || bytes < gatherMinBytes {
			break
		}
		r := s.node.Replica(e, id)
		if id == first || r == nil || !r.IsLeader() || !r.Ready() || !r.Available(lock.GetEntityPath(), lock.GetSubQueue()) {
			continue
		}
		more := proto.CloneOf(lock)
		more.MaxMessages, more.MaxBytes = int32(left), bytes
		got, err := r.Receive(ctx, more, 0)
		if err != nil {
			if e := apierror.From(err); e.Reason == raftbusv1.ErrorReason_ERROR_REASON_OUTCOME_UNKNOWN {
				return nil, e
			}
			continue
		}
		msgs = append(msgs, got...)
		left -= len(got)
		bytes -= receivedSize(got)
	}
	return msgs, nil
}

// receivedSize is an upper bound of what msgs count against a receive's
// byte bound.
func receivedSize(msgs []*raftbusv1.ReceivedMessage) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(proto.Size(m)) + 64
	}
	return n
}

// onLocalPartitions asks each partition of e this node leads, in turn (in
// the order order gives at each round), until one is done; when none is,
// it waits until any of them applies a batch and asks again, until wait
// passes (nil). A failing partition is treated as in any call across
// partitions (see round).
func (s *Messaging) onLocalPartitions(ctx context.Context, e *clusterv1.Entity, order func() []uint32, wait time.Duration, ask func(id uint32, r Replica) (bool, error)) error {
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.node.Stopping())},
		}
		var rd round
		for _, id := range order() {
			r := s.node.Replica(e, id)
			if r == nil || !r.IsLeader() {
				continue
			}
			// Taken before asking, so that a change meanwhile wakes the
			// wait below.
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.Changes())})
			if !r.Ready() {
				rd.failed = apierror.Busy("partition %s is starting; try again", r.Name())
				continue
			}
			ok, err := ask(id, r)
			if err != nil {
				err = apierror.From(err)
			}
			if rd.heard(ok, err) {
				return err
			}
		}
		switch {
		case !rd.answered && rd.failed != nil:
			return rd.failed
		case !rd.answered:
			return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_NOT_LEADER, "this node leads no partition of %q", e.GetName())
		case !time.Now().Before(deadline):
			return nil
		}
		switch chosen, _, _ := reflect.Select(cases); chosen {
		case 0:
			return nil
		case 1:
			return ctx.Err()
		case 2:
			return apierror.Busy("node is shutting down; try another")
		}
	}
}

// receiveAt asks the node at addr to receive from the partitions of the
// lock's entity it leads, waiting up to wait on them all at once.
func (s *Messaging) receiveAt(ctx context.Context, addr string, lock *enginev1.Lock, wait time.Duration) ([]*raftbusv1.ReceivedMessage, error) {
	var msgs []*raftbusv1.ReceivedMessage
	err := s.node.Call(ctx, addr, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		resp, err := raftbusv1.NewMessagingServiceClient(conn).Receive(ctx, receiveRequest(lock, wait))
		msgs = resp.GetMessages()
		return err
	})
	if err != nil {
		return nil, apierror.From(err)
	}
	return msgs, nil
}

// awaitAt asks the node at addr to wait up to wait until a partition of
// the lock's entity it leads has a message (AwaitMessages).
func (s *Messaging) awaitAt(ctx context.Context, addr string, lock *enginev1.Lock, wait time.Duration) (bool, error) {
	var available bool
	err := s.node.Call(ctx, addr, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		resp, err := clusterv1.NewNodeServiceClient(conn).AwaitMessages(ctx, &clusterv1.AwaitMessagesRequest{
			EntityPath: lock.GetEntityPath(),
			SubQueue:   lock.GetSubQueue(),
			MaxWait:    durationpb.New(wait),
		})
		available = resp.GetAvailable()
		return err
	})
	return available, err
}

// AwaitMessages serves NodeService.AwaitMessages: another node, receiving
// across the partitions of an entity, waits on those this node leads
// (see awaitAny).
func (s *Messaging) AwaitMessages(ctx context.Context, req *clusterv1.AwaitMessagesRequest) (*clusterv1.AwaitMessagesResponse, error) {
	t, err := resolve(ctx, s.node, req.GetEntityPath())
	if err != nil {
		return nil, err
	}
	wait, err := waitTime(req.GetMaxWait())
	if err != nil {
		return nil, err
	}
	ok, err := s.awaitLocal(ctx, t.entity, t.path, req.GetSubQueue(), wait)
	if err != nil {
		return nil, err
	}
	return &clusterv1.AwaitMessagesResponse{Available: ok}, nil
}
