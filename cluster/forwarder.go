package cluster

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/meta"
	"github.com/raftbus/raftbus/cluster/routing"
	"github.com/raftbus/raftbus/engine"
	"github.com/raftbus/raftbus/partition"
	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The forwarder moves the messages a partition holds in transfer (see
// engine/transfer.go) to their targets. It runs on the partition's
// leader, one per partition, started by the reconciler for a partition
// whose entity forwards or that holds transfers, and ends when the replica
// stops leading or the node closes. A round takes each target in turn:
// it reads the oldest transfers to it, sends them to the leaders of the
// target's partitions (through the routing every call takes), and then
// removes the accepted ones from the source by a replicated
// CompleteTransfer. A target whose round fails is left alone for a while,
// longer each time, and the others go on; a lost answer or a new leader
// starting over repeats sends, which the targets answer as duplicates.
const (
	// forwardBatchMessages and forwardBatchBytes bound one round: its
	// AcceptTransfer commands, with their framing, stay within what a
	// partition takes (partition.MaxCommandBytes).
	forwardBatchMessages = 256
	forwardBatchBytes    = partition.MaxCommandBytes - 64<<10
	// forwardCallTimeout bounds one send or removal.
	forwardCallTimeout = 10 * time.Second
	// forwardIdleCheck spaces the looks at leadership while nothing is in
	// transfer.
	forwardIdleCheck = time.Second
	// forwardMaxBackoff caps the wait after failed rounds.
	forwardMaxBackoff = 5 * time.Second
)

// forwards reports whether messages of e (a queue, or a topic's
// subscriptions) can go into transfer.
func forwards(e *clusterv1.Entity) bool {
	if q := e.GetQueue(); q.GetForwardTo() != "" || q.GetForwardDeadLetteredMessagesTo() != "" {
		return true
	}
	for _, s := range e.GetSubscriptions() {
		if p := s.GetProperties(); p.GetForwardTo() != "" || p.GetForwardDeadLetteredMessagesTo() != "" {
			return true
		}
	}
	return false
}

// forward starts r's forwarder when r, led here, has or may get messages
// in transfer and none runs.
func (n *Node) forward(r *replica, e *clusterv1.Entity) {
	if r.forwarding.Load() {
		return
	}
	if !forwards(e) {
		pending := 0
		r.p.ReadApplied(func(en *engine.Engine) { pending = en.TransferCount() })
		if pending == 0 {
			return
		}
	}
	r.forwarding.Store(true)
	stream := groupName(e, r.id)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer r.forwarding.Store(false)
		n.runForwarder(r, stream)
	}()
}

// sentTo is what may have been sent to one target, by this forwarder and
// by those of earlier leaders (see engine/transfer.go): no message in
// transfer to it numbered above both was sent.
type sentTo struct {
	// before is the target's claim when this forwarder first looked at
	// it, here is the highest number this forwarder sent it.
	before, here uint64
}

func (s *sentTo) upTo() uint64 { return max(s.before, s.here) }

// runForwarder forwards r's transfers until r stops leading or the node
// closes.
func (n *Node) runForwarder(r *replica, stream string) {
	// The claims of earlier leaders' forwarders must be applied here
	// before this one reads them: a read index waits for every entry
	// committed before this leader.
	ctx, cancel := context.WithTimeout(context.Background(), forwardCallTimeout)
	err := r.p.Read(ctx, func(*engine.Engine) {})
	cancel()
	if err != nil {
		n.log.Debug("forwarder: not current", "group", r.group, "err", err)
		return
	}
	// held are the targets whose last round failed, until when they are
	// left alone; failures counts their failed rounds in a row.
	held := map[string]time.Time{}
	failures := map[string]int{}
	sent := map[string]*sentTo{}
	for r.p.IsLeader() {
		changed := r.p.Changes()
		var targets []string
		r.p.ReadApplied(func(en *engine.Engine) { targets = en.TransferTargets() })
		wait := forwardIdleCheck
		progressed := false
		for _, to := range targets {
			now := time.Now()
			if until, ok := held[to]; ok && now.Before(until) {
				wait = min(wait, until.Sub(now))
				continue
			}
			var batch []engine.Transfer
			// The bodies come from the log; a batch whose bodies could
			// not be read is not sent, and is tried again.
			if err := r.p.ReadApplied(func(en *engine.Engine) { batch = en.TransfersTo(to, forwardBatchMessages, forwardBatchBytes) }); err != nil {
				n.log.Warn("forward messages: read their bodies", "group", r.group, "to", to, "err", err)
				batch = nil
				wait = min(wait, forwardMaxBackoff)
			}
			if len(batch) == 0 {
				continue
			}
			st := sent[to]
			if st == nil {
				st = &sentTo{}
				r.p.ReadApplied(func(en *engine.Engine) { st.before = en.TransferClaim(to) })
				sent[to] = st
			}
			// A target missing from this node's view gets no claim: no
			// message will be sent to it, and a claim would keep the
			// messages from being dead-lettered should it be deleted.
			var err error
			if n.meta.fsm.Entity(to) != nil {
				err = n.claimTransfers(r, to, batch[len(batch)-1].Number)
			}
			if err == nil {
				var claimed uint64
				r.p.ReadApplied(func(en *engine.Engine) { claimed = en.TransferClaim(to) })
				err = n.forwardRound(r, stream, batch, st, claimed)
			}
			if err != nil {
				n.log.Debug("forward messages", "group", r.group, "to", to, "err", err)
				backoff := min(routing.Backoff(failures[to]), forwardMaxBackoff)
				failures[to]++
				held[to] = now.Add(backoff)
				wait = min(wait, backoff)
				continue
			}
			delete(held, to)
			delete(failures, to)
			progressed = true
		}
		if progressed {
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-n.stop:
			timer.Stop()
			return
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// claimTransfers has r record, before anything numbered up to last is
// sent to the entity to, that it may be (see engine.TransferClaim), when
// no claim covers it yet. A claim covers up to two batches; the removal
// of a round's accepted messages carries the claim of the next round
// (forwardRound), so this proposes only when messages start to flow.
func (n *Node) claimTransfers(r *replica, to string, last uint64) error {
	var claimed, upTo uint64
	r.p.ReadApplied(func(en *engine.Engine) {
		claimed, upTo = en.TransferClaim(to), en.TransferClaimAhead(to, 2*forwardBatchMessages)
	})
	if last <= claimed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardCallTimeout)
	defer cancel()
	claim := &enginev1.CompleteTransfer{Claims: []*enginev1.TransferClaim{{Target: to, UpTo: max(upTo, last)}}}
	if _, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_CompleteTransfer{CompleteTransfer: claim}}); err != nil {
		return fmt.Errorf("claim transfers to %s: %w", to, err)
	}
	return nil
}

// forwardGroup is the transfers of one round that go to one partition of
// one target, in number order.
type forwardGroup struct {
	target    string
	partition uint32
	entity    *clusterv1.Entity
	transfers []engine.Transfer
}

// forwardRound sends batch, the oldest transfers of r, to their targets
// (those numbered up to claimed) and removes from r those accepted.
// Transfers for the same partition of a target go in one call, in number
// order, and a group failing leaves the others going: each target
// partition sees a stream's numbers in increasing order, with none
// missing that it has not accepted, which is what its duplicate check
// needs (engine/transfer.go).
func (n *Node) forwardRound(r *replica, stream string, batch []engine.Transfer, sent *sentTo, claimed uint64) error {
	ctx, cancel := context.WithTimeout(routing.Internal(context.Background()), forwardCallTimeout)
	defer cancel()
	var groups []*forwardGroup
	done := &enginev1.CompleteTransfer{}
	byKey := map[string]*forwardGroup{}
	targets := map[string]*clusterv1.Entity{}
	var firstErr error
	for _, x := range batch {
		e, ok := targets[x.To]
		if !ok {
			e = n.meta.fsm.Entity(x.To)
			if k := e.GetKind(); e != nil && k != clusterv1.EntityKind_ENTITY_KIND_QUEUE && k != clusterv1.EntityKind_ENTITY_KIND_TOPIC {
				e = nil
			}
			targets[x.To] = e
		}
		if e == nil {
			// Not in this node's view: deleted, or not in the view yet.
			// Only the metadata leader's NOT_FOUND says deleted; then the
			// messages no forwarder sent are dead-lettered, and those
			// one may have sent wait for a target of that name.
			if firstErr == nil {
				firstErr = n.targetGone(ctx, x, sent.upTo(), done)
			}
			continue
		}
		if x.Number > claimed {
			// Never sent unclaimed (see engine/transfer.go): the next
			// round claims it.
			if firstErr == nil {
				firstErr = apierror.Busy("transfer %d to %q is not claimed yet", x.Number, x.To)
			}
			continue
		}
		pid := targetPartition(stream, x, uint32(len(e.GetPartitions())))
		key := fmt.Sprintf("%s\x00%d", x.To, pid)
		g := byKey[key]
		if g == nil {
			g = &forwardGroup{target: x.To, partition: pid, entity: e}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.transfers = append(g.transfers, x)
	}
	for _, g := range groups {
		if err := n.sendGroup(ctx, stream, g, done, sent); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("to %s/%d: %w", g.target, g.partition, err)
		}
	}
	if len(done.Numbers) > 0 || len(done.Failed) > 0 || len(done.Gone) > 0 {
		if len(done.Numbers) > 0 && len(done.Gone) == 0 {
			// The next round's claim rides along: a steady stream of
			// messages then costs no proposal of its own for claims.
			to := batch[0].To
			r.p.ReadApplied(func(en *engine.Engine) {
				if ahead := en.TransferClaimAhead(to, 2*forwardBatchMessages); ahead > en.TransferClaim(to) {
					done.Claims = []*enginev1.TransferClaim{{Target: to, UpTo: ahead}}
				}
			})
		}
		if _, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_CompleteTransfer{CompleteTransfer: done}}); err != nil {
			return fmt.Errorf("complete transfers: %w", err)
		}
	}
	return firstErr
}

// sendGroup sends a group's transfers and notes in done those accepted
// and the one refused for good, if any. A group refused for good is sent
// again one message at a time, in order, up to the message the target
// refuses: the source must have dead-lettered that one before any later
// one is sent, or a repeat would take the later one's number for proof
// that it was accepted too (see engine/transfer.go).
func (n *Node) sendGroup(ctx context.Context, stream string, g *forwardGroup, done *enginev1.CompleteTransfer, sent *sentTo) error {
	err := n.sendTransfers(ctx, stream, g, g.transfers, sent)
	if err == nil {
		// Messages forwarded to an entity are sent to it: a use that
		// keeps it from being deleted as idle.
		n.idle.Use(g.target)()
		for _, x := range g.transfers {
			done.Numbers = append(done.Numbers, x.Number)
		}
		return nil
	}
	if !refusedForGood(err) {
		return err
	}
	for _, x := range g.transfers {
		err := n.sendTransfers(ctx, stream, g, []engine.Transfer{x}, sent)
		switch {
		case err == nil:
			done.Numbers = append(done.Numbers, x.Number)
		case refusedForGood(err):
			n.log.Warn("forwarding target refused a message: dead-lettered in its source", "from", x.From, "to", x.To, "err", err)
			done.Failed = append(done.Failed, &enginev1.FailedTransfer{Number: x.Number, Description: failureDescription(x.To, err)})
			return nil
		default:
			return err
		}
	}
	return nil
}

// targetGone asks the metadata leader whether x's target exists. When it
// does not, it notes in done that the target is gone (so that the
// transfers to it numbered above sentUpTo are dead-lettered). It returns
// the error that holds the target's round: NOT_FOUND while messages a
// forwarder may have sent wait, or what kept the question unanswered.
func (n *Node) targetGone(ctx context.Context, x engine.Transfer, sentUpTo uint64, done *enginev1.CompleteTransfer) error {
	_, err := n.entity(ctx, x.To)
	if err == nil {
		return apierror.Busy("forwarding target %q of %q is not in this node's metadata yet", x.To, x.From)
	}
	if apierror.From(err).Reason != raftbusv1.ErrorReason_ERROR_REASON_NOT_FOUND {
		return fmt.Errorf("look up forwarding target %q: %w", x.To, err)
	}
	n.log.Warn("forwarding target deleted: its messages in transfer are dead-lettered in their source", "from", x.From, "to", x.To)
	done.Gone = append(done.Gone, &enginev1.GoneTarget{Target: x.To, SentUpTo: sentUpTo,
		Description: fmt.Sprintf("forwarding to %q failed: it does not exist (deleted)", x.To)})
	return apierror.NotFound("forwarding target %q of %q does not exist", x.To, x.From)
}

// refusedForGood reports whether a target's refusal of transfers is one a
// repeat cannot get past: the message does not fit the target.
func refusedForGood(err error) bool {
	switch apierror.From(err).Reason {
	case raftbusv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, raftbusv1.ErrorReason_ERROR_REASON_MESSAGE_SIZE_EXCEEDED:
		return true
	}
	return false
}

// failureDescription is the dead-letter description of a message its
// target refused, within the 4096 characters of a description.
func failureDescription(target string, err error) string {
	d := []rune(fmt.Sprintf("forwarding to %q failed: %s", target, apierror.From(err).Message))
	return string(d[:min(len(d), 4096)])
}

// targetPartition is the partition of a target with partitions partitions
// a transferred message goes to: by the target's routing rules (session
// id, partition key, message id), and a message with none of them by its
// stream and number, so that a repeat goes where the first attempt went.
func targetPartition(stream string, x engine.Transfer, partitions uint32) uint32 {
	m := x.Message
	switch {
	case partitions <= 1:
		return 0
	case m.GetSessionId() != "":
		return raftbusv1.PartitionForKey(m.GetSessionId(), partitions)
	case m.GetPartitionKey() != "":
		return raftbusv1.PartitionForKey(m.GetPartitionKey(), partitions)
	case m.GetMessageId() != "":
		return raftbusv1.PartitionForKey(m.GetMessageId(), partitions)
	}
	return raftbusv1.PartitionForKey(fmt.Sprintf("%s#%d", stream, x.Number), partitions)
}

// sendTransfers has the leader of the group's target partition accept
// transfers of the group.
func (n *Node) sendTransfers(ctx context.Context, stream string, g *forwardGroup, transfers []engine.Transfer, sent *sentTo) error {
	accept := &enginev1.AcceptTransfer{EntityPath: g.target, Stream: stream}
	for _, x := range transfers {
		accept.Messages = append(accept.Messages, &enginev1.TransferredMessage{Number: x.Number, Message: x.Message})
		sent.here = max(sent.here, x.Number) // before it goes: it may arrive
	}
	_, err := n.acceptTransfer(ctx, g.entity, g.partition, accept)
	return err
}

// acceptTransfer applies accept at the leader of partition id of e, here
// or at the node that leads it.
func (n *Node) acceptTransfer(ctx context.Context, e *clusterv1.Entity, id uint32, accept *enginev1.AcceptTransfer) ([]*raftbusv1.SendResult, error) {
	var out []*raftbusv1.SendResult
	err := n.route(ctx, e, id, routing.Idempotent, func(r *replica) error {
		res, err := r.p.Apply(ctx, &enginev1.Command{Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: accept}})
		if err != nil {
			return err
		}
		out = res.GetAcceptTransfer().GetMessages()
		return nil
	}, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		resp, err := clusterv1.NewNodeServiceClient(conn).AcceptTransfer(ctx, &clusterv1.AcceptTransferRequest{PartitionId: id, Accept: accept})
		out = resp.GetMessages()
		return err
	})
	return out, err
}

// AcceptTransfer serves another node's forwarder: at the target
// partition's leader, here or one hop on.
func (s *nodeService) AcceptTransfer(ctx context.Context, req *clusterv1.AcceptTransferRequest) (*clusterv1.AcceptTransferResponse, error) {
	path := req.GetAccept().GetEntityPath()
	if _, _, isSub := meta.SplitSubscriptionPath(path); isSub {
		return nil, apierror.Invalid("%q is a subscription: messages are forwarded to queues and topics", path)
	}
	e, err := s.n.entity(ctx, path)
	if err != nil {
		return nil, err
	}
	out, err := s.n.acceptTransfer(ctx, e, req.GetPartitionId(), req.GetAccept())
	if err != nil {
		return nil, err
	}
	return &clusterv1.AcceptTransferResponse{Messages: out}, nil
}
