package servicebus

import (
	"context"
	"errors"
	"time"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
)

const (
	sessionFilter = amqp.Symbol("com.microsoft:session-filter")
	// longPoll bounds one wait for messages; the loop then asks again.
	longPoll = 30 * time.Second
	// maxReceive bounds one receive, whatever the credit.
	maxReceive = 256
	// settleTimeout bounds applying one settlement the SDK sent.
	settleTimeout = 30 * time.Second
)

// attachReceiver serves a link on which the SDK receives from a queue, a
// subscription or a dead-letter queue. Link credit drives the receives:
// the broker locks (or, in receive-and-delete mode, removes) only as many
// messages as the SDK asked for.
func (c *connection) attachReceiver(l *amqp.Link, e entity) error {
	if _, err := c.checkEntity(l.Context(), e, false); err != nil {
		return err
	}
	// Service Bus's receive-and-delete is settled on transfer; anything
	// else is peek-lock, settled by the SDK's dispositions.
	receiveAndDelete := l.ReceiverSettleMode == amqp.ReceiverSettleFirst && l.SenderSettleMode == amqp.SenderSettleSettled
	var rcv *client.Receiver
	var err error
	if filter, ok := l.Source.Filter[sessionFilter]; ok {
		rcv, err = c.acceptSession(l, e, filter, receiveAndDelete)
		if err != nil {
			return err
		}
	} else if rcv, err = c.newReceiver(e, receiveAndDelete); err != nil {
		return toAMQPError(err)
	}
	released := newReleasedMessages()
	l.OnDisposition = func(d *amqp.OutgoingDelivery, state amqp.DeliveryState, settled bool) {
		c.dispose(l, d, state, settled, released)
	}
	c.spawn(func() { c.receiveLoop(l, e, rcv, receiveAndDelete, released) })
	return nil
}

func (c *connection) newReceiver(e entity, receiveAndDelete bool) (*client.Receiver, error) {
	opts := &client.ReceiverOptions{SubQueue: e.SubQueue}
	if receiveAndDelete {
		opts.ReceiveMode = client.ReceiveModeReceiveAndDelete
	}
	if e.Subscription != "" {
		return c.h.Client.NewReceiverForSubscription(e.Topic, e.Subscription, opts)
	}
	return c.h.Client.NewReceiverForQueue(e.Path, opts)
}

// receiveLoop receives while the link has credit and hands the messages
// out, until the link ends. Messages the SDK released on this link go out
// again first (see releasedMessages).
func (c *connection) receiveLoop(l *amqp.Link, e entity, rcv *client.Receiver, receiveAndDelete bool, released *releasedMessages) {
	ctx := l.Context()
	defer func() { c.release(rcv, released.all()) }()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		// The channels first: a flow or a release between these and the
		// checks below is then not missed.
		changed, added := l.CreditChanged(), released.wait()
		credit, drain := l.Credit()
		again, expiring := released.take(int(min(credit, maxReceive)), time.Now())
		c.release(rcv, expiring)
		if credit == 0 {
			// Wait for credit, or until a kept message must go back.
			var expiry <-chan time.Time
			var timer *time.Timer
			if next := released.next(); !next.IsZero() {
				timer = time.NewTimer(time.Until(next))
				expiry = timer.C
			}
			select {
			case <-changed:
			case <-expiry:
			case <-ctx.Done():
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}
		msgs := again
		if len(msgs) == 0 {
			// The token the link was attached with may have expired.
			if err := c.authorize(e, rightListen); err != nil {
				l.Detach(err)
				return
			}
			var err error
			msgs, err = c.receive(l, rcv, int(min(credit, maxReceive)), drain, added)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// The entity is gone, or the session this link held: the
				// SDK must hear it and attach again.
				if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrSessionLockLost) {
					l.Detach(toAMQPError(err))
					return
				}
				// A cluster without a leader for a while: try again,
				// slower each time, without giving up the link.
				c.log.Debug("amqp receive failed", "entity", e.Path, "err", err)
				backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				continue
			}
			backoff = 0
			if !receiveAndDelete {
				for _, m := range msgs {
					c.remember(e, rcv, m)
				}
			}
		}
		for i, m := range msgs {
			payload, err := fromReceived(m, !receiveAndDelete).MarshalBinary()
			if err == nil {
				err = l.Send(ctx, &amqp.OutgoingDelivery{Tag: dotNetGUID(m.LockToken), Payload: payload, Settled: receiveAndDelete,
					Value: releasable{token: m.LockToken, msg: m}})
			}
			if err != nil {
				c.log.Debug("amqp delivery failed", "entity", e.Path, "err", err)
				if !receiveAndDelete {
					c.release(rcv, msgs[i:])
				}
				return
			}
		}
		if drain && len(msgs) == 0 {
			l.DrainComplete()
		}
	}
}

// releasable is what a delivery carries for its disposition: its lock
// token, and the message to keep should the SDK release it.
type releasable struct {
	token [16]byte
	msg   *client.ReceivedMessage
}

// receive waits for up to n messages; a drain asks only for what is
// there now, and a drain asked for meanwhile, or a message released on
// the link (which goes out first), cuts the wait short.
func (c *connection) receive(l *amqp.Link, rcv *client.Receiver, n int, drain bool, released <-chan struct{}) ([]*client.ReceivedMessage, error) {
	wait := longPoll
	if drain {
		wait = 10 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(l.Context())
	watching := make(chan struct{})
	defer func() {
		cancel()
		<-watching
	}()
	go func() {
		defer close(watching)
		for changed := l.CreditChanged(); ; changed = l.CreditChanged() {
			if _, d := l.Credit(); d {
				cancel()
				return
			}
			select {
			case <-changed:
			case <-released:
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	msgs, err := rcv.ReceiveMessages(ctx, n, &client.ReceiveMessagesOptions{MaxWaitTime: wait})
	if err != nil && l.Context().Err() == nil && ctx.Err() != nil {
		return msgs, nil // cut short by a drain or a release: nothing new to hand out
	}
	return msgs, err
}

// release gives back messages locked for a link that can no longer take
// them, so that they do not wait for their locks to expire.
func (c *connection) release(rcv *client.Receiver, msgs []*client.ReceivedMessage) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for _, m := range msgs {
		c.forget(m.LockToken)
		if err := rcv.AbandonMessage(ctx, m, nil); err != nil {
			c.log.Debug("amqp abandon of an undelivered message failed", "err", err)
		}
	}
}

// dispose applies the SDK's disposition of a delivery: accepted completes
// it, released and modified abandon it, modified{undeliverable-here}
// defers it, rejected dead-letters it. In receiver settle mode second the
// outcome goes back settled, a lost lock as rejected{message-lock-lost}.
func (c *connection) dispose(l *amqp.Link, d *amqp.OutgoingDelivery, state amqp.DeliveryState, settled bool, released *releasedMessages) {
	r, _ := d.Value.(releasable)
	token := r.token
	lk := c.lockOf(token)
	var err error
	switch _, release := state.(*amqp.Released); {
	case lk == nil:
		err = client.ErrLockLost
	case release && r.msg != nil && l.Context().Err() == nil:
		// Still locked, kept for the link's next credit, uncounted.
		released.add(r.msg)
		if l.Context().Err() != nil {
			// The link ended meanwhile: its loop may have given back
			// what it kept already.
			c.release(lk.rcv, released.all())
		}
		if !settled {
			l.Settle(d, state)
		}
		return
	default:
		// Not the link's context: an SDK settles and then detaches at
		// once (the Python SDK's receiver does, leaving its with block),
		// and a settlement the peer sent must be applied all the same.
		// When the peer settled first it has no way to hear of a failure.
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		err = c.settle(ctx, lk, state)
		cancel()
	}
	if err == nil || errors.Is(err, client.ErrLockLost) || errors.Is(err, client.ErrNotFound) {
		c.forget(token)
	}
	if settled {
		if err != nil {
			c.log.Debug("a settlement the SDK sent settled failed", "err", err)
		}
		return
	}
	reply := state
	switch {
	case err != nil:
		reply = &amqp.Rejected{Error: toAMQPError(err)}
	case isRejected(state):
		// A rejected outcome with an error reads as a failed settlement
		// to the SDKs: the dead-lettering succeeded, say so without it.
		reply = &amqp.Rejected{}
	}
	l.Settle(d, reply)
}

func isRejected(s amqp.DeliveryState) bool {
	_, ok := s.(*amqp.Rejected)
	return ok
}

// settle applies an AMQP outcome to a locked message.
func (c *connection) settle(ctx context.Context, lk *lock, state amqp.DeliveryState) error {
	switch s := state.(type) {
	case *amqp.Accepted:
		return lk.rcv.CompleteMessage(ctx, lk.msg, nil)
	case *amqp.Released, nil:
		return lk.rcv.AbandonMessage(ctx, lk.msg, nil)
	case *amqp.Modified:
		props, err := propertiesToModify(s.MessageAnnotations)
		if err != nil {
			return &client.Error{Code: client.CodeInvalidArgument, Message: err.Error()}
		}
		if s.UndeliverableHere {
			return lk.rcv.DeferMessage(ctx, lk.msg, &client.DeferMessageOptions{PropertiesToModify: props})
		}
		return lk.rcv.AbandonMessage(ctx, lk.msg, &client.AbandonMessageOptions{PropertiesToModify: props})
	case *amqp.Rejected:
		opts := &client.DeadLetterOptions{}
		if s.Error != nil {
			info := map[string]any{}
			for k, v := range s.Error.Info {
				info[string(k)] = v
			}
			if r, ok := info[propDeadLetterReason].(string); ok {
				opts.Reason = &r
			}
			if d, ok := info[propDeadLetterDescription].(string); ok {
				opts.ErrorDescription = &d
			}
			delete(info, propDeadLetterReason)
			delete(info, propDeadLetterDescription)
			props, err := propertiesToModify(info)
			if err != nil {
				return &client.Error{Code: client.CodeInvalidArgument, Message: err.Error()}
			}
			opts.PropertiesToModify = props
			if opts.Reason == nil && s.Error.Condition != condDeadLetter && s.Error.Condition != "" {
				// Another SDK's rejection: keep its reason.
				r := string(s.Error.Condition)
				opts.Reason = &r
			}
		}
		return lk.rcv.DeadLetterMessage(ctx, lk.msg, opts)
	}
	return &client.Error{Code: client.CodeInvalidArgument, Message: "unknown disposition"}
}

// propertiesToModify converts properties an SDK asks to merge into a
// settled message.
func propertiesToModify[K ~string](m map[K]any) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		pv, err := toPropertyValue(v)
		if err != nil {
			return nil, err
		}
		out[string(k)] = pv
	}
	return out, nil
}
