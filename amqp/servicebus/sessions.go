package servicebus

import (
	"context"
	"errors"
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
)

// Session receivers: a receiver link whose source carries the session
// filter holds one session's lock for the life of the link. The filter's
// value names the session, or is null for the next available one; the
// attach reply names the session taken and when its lock ends.

const (
	propLockedUntilUTC = amqp.Symbol("com.microsoft:locked-until-utc") // long: .NET ticks
	propTimeout        = amqp.Symbol("com.microsoft:timeout")          // uint: milliseconds
	condSessionLocked  = amqp.Symbol("com.microsoft:session-cannot-be-locked")
	// acceptNextTimeout is how long an accept of the next available
	// session waits when the client names no limit, as in Service Bus.
	acceptNextTimeout = time.Minute
	// epochTicks is 1970-01-01 in .NET ticks (100 ns since year 1).
	epochTicks = int64(621355968000000000)
)

func dotNetTicks(t time.Time) int64 { return epochTicks + t.UnixMilli()*10000 }

// acceptNextWait is how long an accept of the next available session
// waits for one, given the client's com.microsoft:timeout (0: none). The
// client asks for its own deadline less a few milliseconds of jitter and
// gives up at that deadline, so the answer that no session became
// available leaves a twentieth of the wait (at most 250 ms) early, to
// reach the client before it gives up.
func acceptNextWait(timeoutMs uint32) time.Duration {
	if timeoutMs == 0 {
		return acceptNextTimeout
	}
	wait := time.Duration(timeoutMs) * time.Millisecond
	return wait - min(wait/20, 250*time.Millisecond)
}

// sessionKey names a held session on a connection.
func sessionKey(path, sessionID string) string { return path + "\x00" + sessionID }

// acceptSession takes the session a link asks for and sets the attach
// reply; it returns the session's receiver.
func (c *connection) acceptSession(l *amqp.Link, e entity, filter any, receiveAndDelete bool) (*client.Receiver, error) {
	if e.SubQueue != client.SubQueueNone {
		return nil, &amqp.Error{Condition: amqp.ErrCondNotAllowed, Description: "a dead-letter queue has no sessions"}
	}
	// The Go and .NET SDKs send the filter's value described (by
	// com.microsoft:session-filter); uamqp, under the Python SDK, bare.
	d, described := filter.(amqp.Described)
	if !described {
		d.Value = filter
	}
	sessionID, named := d.Value.(string)
	if d.Value != nil && !named {
		return nil, &amqp.Error{Condition: amqp.ErrCondInvalidField, Description: fmt.Sprintf("the session filter's value is a %T, not a string", d.Value)}
	}
	ctx := l.Context()
	if !named {
		ms, _ := l.Properties[propTimeout].(uint32)
		wait := acceptNextWait(ms)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	opts := &client.SessionReceiverOptions{}
	if receiveAndDelete {
		opts.ReceiveMode = client.ReceiveModeReceiveAndDelete
	}
	var sr *client.SessionReceiver
	var err error
	switch {
	case e.Subscription != "" && named:
		sr, err = c.h.Client.AcceptSessionForSubscription(ctx, e.Topic, e.Subscription, sessionID, opts)
	case e.Subscription != "":
		sr, err = c.h.Client.AcceptNextSessionForSubscription(ctx, e.Topic, e.Subscription, opts)
	case named:
		sr, err = c.h.Client.AcceptSessionForQueue(ctx, e.Path, sessionID, opts)
	default:
		sr, err = c.h.Client.AcceptNextSessionForQueue(ctx, e.Path, opts)
	}
	if err != nil {
		switch {
		case !named && errors.Is(err, context.DeadlineExceeded) && l.Context().Err() == nil:
			return nil, &amqp.Error{Condition: condTimeout, Description: "no session became available"}
		case errors.Is(err, client.ErrSessionCannotBeLocked):
			return nil, &amqp.Error{Condition: condSessionLocked, Description: fmt.Sprintf("session %q is held by another receiver", sessionID)}
		}
		return nil, toAMQPError(err)
	}
	key := sessionKey(e.Path, sr.SessionID())
	c.mu.Lock()
	c.sessions[key] = sr
	c.linkSession[l.Name] = sr.SessionID()
	c.mu.Unlock()
	l.OnDetach = func(*amqp.Error) {
		c.mu.Lock()
		if c.sessions[key] == sr {
			delete(c.sessions, key)
		}
		if c.linkSession[l.Name] == sr.SessionID() {
			delete(c.linkSession, l.Name)
		}
		c.mu.Unlock()
		// Give the session back at once rather than when its lock
		// expires; its unsettled messages become available again.
		c.spawn(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := sr.Close(ctx); err != nil {
				c.log.Debug("amqp session release failed", "entity", e.Path, "session", sr.SessionID(), "err", err)
			}
		})
	}
	src := *l.Source
	src.Filter = map[amqp.Symbol]any{}
	for k, v := range l.Source.Filter {
		src.Filter[k] = v
	}
	if described {
		src.Filter[sessionFilter] = amqp.Described{Descriptor: d.Descriptor, Value: sr.SessionID()}
	} else {
		src.Filter[sessionFilter] = sr.SessionID()
	}
	l.ReplySource = &src
	l.ReplyProperties = map[amqp.Symbol]any{propLockedUntilUTC: dotNetTicks(sr.LockedUntil())}
	return sr.Receiver, nil
}

// heldSession is the session a management request names, held by a link
// of this connection.
func (c *connection) heldSession(e entity, body map[string]any) (*client.SessionReceiver, *goamqp.Message) {
	id, ok := body["session-id"].(string)
	if !ok {
		return nil, status(400, "session-id must be a string", nil)
	}
	c.mu.Lock()
	sr := c.sessions[sessionKey(e.Path, id)]
	c.mu.Unlock()
	if sr == nil {
		return nil, status(410, fmt.Sprintf("session %q is not held by a receiver on this connection", id), nil)
	}
	return sr, nil
}

func (c *connection) renewSessionLock(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	sr, fail := c.heldSession(e, body)
	if fail != nil {
		return fail
	}
	if err := sr.RenewSessionLock(ctx, nil); err != nil {
		return failure(err)
	}
	return status(200, "OK", map[string]any{"expiration": sr.LockedUntil().UTC()})
}

func (c *connection) getSessionState(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	sr, fail := c.heldSession(e, body)
	if fail != nil {
		return fail
	}
	state, err := sr.GetSessionState(ctx, nil)
	if err != nil {
		return failure(err)
	}
	var v any
	if state != nil {
		v = state
	}
	return status(200, "OK", map[string]any{"session-state": v})
}

func (c *connection) setSessionState(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	sr, fail := c.heldSession(e, body)
	if fail != nil {
		return fail
	}
	state, _ := body["session-state"].([]byte)
	if err := sr.SetSessionState(ctx, state, nil); err != nil {
		return failure(err)
	}
	return status(200, "OK", map[string]any{})
}
