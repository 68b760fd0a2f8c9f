package servicebus

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
)

// The request/response nodes: $cbs takes tokens, <entity>/$management
// takes operations on the entity. A request arrives on a link to the
// node; its answer goes on the link whose target is the request's
// reply-to address or, when it names none, on the link that receives
// from the same node, correlated by the request's message-id. The
// answer follows the request's disposition: uamqp drops one that comes
// before it.

// managementTimeout bounds one management operation.
const managementTimeout = 60 * time.Second

var responseTag atomic.Uint64

func (c *connection) attachManagement(l *amqp.Link, node string, e entity, cbs bool) error {
	if !l.Incoming {
		addr := ""
		if l.Target != nil {
			addr = l.Target.Address
		}
		// A session receiver's management link names its session: its
		// peeks and deferred receives are the session's.
		sessionID := ""
		if l.Source != nil {
			switch f := l.Source.Filter[sessionFilter].(type) {
			case amqp.Described:
				sessionID, _ = f.Value.(string)
			case string:
				sessionID = f
			}
		}
		c.mu.Lock()
		if addr != "" {
			c.replyTo[addr] = l
			c.replySession[addr] = sessionID
		}
		c.nodeReply[node] = l
		c.mu.Unlock()
		l.OnDetach = func(*amqp.Error) {
			c.mu.Lock()
			if addr != "" && c.replyTo[addr] == l {
				delete(c.replyTo, addr)
				delete(c.replySession, addr)
			}
			if c.nodeReply[node] == l {
				delete(c.nodeReply, node)
			}
			c.mu.Unlock()
		}
		return nil
	}
	if !cbs {
		if _, err := c.checkEntity(l.Context(), e, false); err != nil && e.Subscription == "" {
			// A sender's management node serves a queue or a topic.
			if _, err := c.checkEntity(l.Context(), e, true); err != nil {
				return err
			}
		}
	}
	l.OnMessage = func(d *amqp.Delivery) amqp.DeliveryState {
		var req goamqp.Message
		if err := req.UnmarshalBinary(d.Payload); err != nil {
			return &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrCondDecode, Description: err.Error()}}
		}
		reply, err := c.replyLink(&req, node)
		if err != nil {
			return &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrCondPreconditionErr, Description: err.Error()}}
		}
		var resp *goamqp.Message
		if cbs {
			resp = c.putToken(&req)
		} else {
			resp = c.operation(l.Context(), e, &req)
		}
		d.AfterSettle(func() {
			if err := c.respond(l.Context(), reply, &req, resp); err != nil {
				c.log.Debug("management response not sent", "node", node, "err", err)
			}
		})
		return &amqp.Accepted{}
	}
	return nil
}

// replyLink is the link that takes the answer to req, a request sent to
// node: the one attached with req's reply-to as its target, or without
// a reply-to, the one receiving from node.
func (c *connection) replyLink(req *goamqp.Message, node string) (*amqp.Link, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Properties == nil || req.Properties.ReplyTo == nil {
		if l := c.nodeReply[node]; l != nil {
			return l, nil
		}
		return nil, fmt.Errorf("the request has no reply-to address, and no link receives from %s", node)
	}
	if l := c.replyTo[*req.Properties.ReplyTo]; l != nil {
		return l, nil
	}
	return nil, fmt.Errorf("no link attached to reply-to address %q", *req.Properties.ReplyTo)
}

// respond sends resp to req on link l.
func (c *connection) respond(ctx context.Context, l *amqp.Link, req, resp *goamqp.Message) error {
	if req.Properties == nil {
		req.Properties = &goamqp.MessageProperties{}
	}
	if resp.Properties == nil {
		resp.Properties = &goamqp.MessageProperties{}
	}
	resp.Properties.CorrelationID = req.Properties.MessageID
	encoded, _ := resp.Value.(encodedValue)
	if encoded != nil {
		resp.Value = nil
	}
	payload, err := resp.MarshalBinary()
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	// The body section comes last: the message has no footer.
	payload = append(payload, encoded...)
	tag := binary.BigEndian.AppendUint64(nil, responseTag.Add(1))
	return l.Send(ctx, &amqp.OutgoingDelivery{Tag: tag, Payload: payload, Settled: true})
}

func status(code int32, description string, value any) *goamqp.Message {
	return &goamqp.Message{ApplicationProperties: map[string]any{"statusCode": code, "statusDescription": description}, Value: value}
}

// failure answers an operation that failed, with the error's condition
// as errorCondition: the SDKs pick their exception (lock lost, not found,
// already exists, server busy) and whether to retry by it.
func failure(err error) *goamqp.Message {
	ae := toAMQPError(err)
	resp := status(statusOf(err), ae.Description, nil)
	resp.ApplicationProperties["errorCondition"] = goamqp.Symbol(ae.Condition)
	return resp
}

// operation runs one $management operation.
func (c *connection) operation(ctx context.Context, e entity, req *goamqp.Message) *goamqp.Message {
	ctx, cancel := context.WithTimeout(ctx, managementTimeout)
	defer cancel()
	op, _ := req.ApplicationProperties["operation"].(string)
	body, _ := req.Value.(map[string]any)
	if body == nil {
		body = map[string]any{}
	}
	e.Session = c.sessionOfRequest(req, body)
	if err := c.authorize(e, managementRight(op)); err != nil {
		return status(401, err.Description, nil)
	}
	switch op {
	case "com.microsoft:renew-lock":
		return c.renewLocks(ctx, body)
	case "com.microsoft:peek-message":
		return c.peek(ctx, e, body)
	case "com.microsoft:schedule-message":
		return c.schedule(ctx, e, body)
	case "com.microsoft:cancel-scheduled-message":
		return c.cancelScheduled(ctx, e, body)
	case "com.microsoft:receive-by-sequence-number":
		return c.receiveDeferred(ctx, e, body)
	case "com.microsoft:update-disposition":
		return c.updateDisposition(ctx, body)
	case "com.microsoft:renew-session-lock":
		return c.renewSessionLock(ctx, e, body)
	case "com.microsoft:get-session-state":
		return c.getSessionState(ctx, e, body)
	case "com.microsoft:set-session-state":
		return c.setSessionState(ctx, e, body)
	case "com.microsoft:add-rule":
		return c.addRule(ctx, e, body)
	case "com.microsoft:remove-rule":
		return c.removeRule(ctx, e, body)
	case "com.microsoft:enumerate-rules":
		return c.enumerateRules(ctx, e, body)
	}
	// 404 rather than 501: the Azure SDKs give up at once only on 401,
	// 404 and 410; any other code makes them reopen the connection and
	// try again for a minute.
	return status(404, fmt.Sprintf("the management operation %q is not supported by this broker yet", op), nil)
}

// sessionOfRequest is the session a request is about, when it comes
// from a session receiver: named in its body, or by its management link's
// session filter, or by the receiver link it names in
// associated-link-name (what the Go SDK sends).
func (c *connection) sessionOfRequest(req *goamqp.Message, body map[string]any) string {
	if id, ok := body["session-id"].(string); ok {
		return id
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Properties != nil && req.Properties.ReplyTo != nil {
		if id := c.replySession[*req.Properties.ReplyTo]; id != "" {
			return id
		}
	}
	if name, ok := req.ApplicationProperties["associated-link-name"].(string); ok {
		return c.linkSession[name]
	}
	return ""
}

func lockTokens(body map[string]any) ([][16]byte, error) {
	switch v := body["lock-tokens"].(type) {
	case []goamqp.UUID:
		out := make([][16]byte, len(v))
		for i, u := range v {
			out[i] = u
		}
		return out, nil
	}
	return nil, fmt.Errorf("lock-tokens must be an array of uuids, not %T", body["lock-tokens"])
}

func sequenceNumbers(body map[string]any) ([]int64, error) {
	if v, ok := body["sequence-numbers"].([]int64); ok {
		return v, nil
	}
	return nil, fmt.Errorf("sequence-numbers must be an array of longs, not %T", body["sequence-numbers"])
}

func (c *connection) renewLocks(ctx context.Context, body map[string]any) *goamqp.Message {
	tokens, err := lockTokens(body)
	if err != nil {
		return status(400, err.Error(), nil)
	}
	expirations := make([]time.Time, 0, len(tokens))
	for _, t := range tokens {
		lk := c.lockOf(t)
		if lk == nil {
			return status(410, fmt.Sprintf("the lock %x is lost, or was not handed out through this node", t), nil)
		}
		if err := c.authorize(lk.entity, rightListen); err != nil {
			return status(401, err.Description, nil)
		}
		if err := lk.rcv.RenewMessageLock(ctx, lk.msg, nil); err != nil {
			return failure(err)
		}
		expirations = append(expirations, lk.msg.LockedUntil.UTC())
	}
	return status(200, "OK", map[string]any{"expirations": expirations})
}

// managementReceiver is a receiver of the entity for management
// operations, one per entity and mode on the connection; for a session
// receiver's requests, the session's receiver.
func (c *connection) managementReceiver(e entity, receiveAndDelete bool) (*client.Receiver, error) {
	if e.Session != "" {
		c.mu.Lock()
		sr := c.sessions[sessionKey(e.Path, e.Session)]
		c.mu.Unlock()
		if sr == nil {
			return nil, &client.Error{Code: client.CodeSessionLockLost, Message: fmt.Sprintf("session %q is not held by a receiver on this connection", e.Session)}
		}
		return sr.Receiver, nil
	}
	key := fmt.Sprintf("%s|%d|%v", e.Path, e.SubQueue, receiveAndDelete)
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.receivers[key]; r != nil {
		return r, nil
	}
	r, err := c.newReceiver(e, receiveAndDelete)
	if err != nil {
		return nil, err
	}
	c.receivers[key] = r
	return r, nil
}

// encodedMessages answers peek and receive-by-sequence-number: a list of
// maps, each with one encoded message (and its lock token when locked).
func encodedMessages(msgs []*client.ReceivedMessage, locked bool) (*goamqp.Message, error) {
	if len(msgs) == 0 {
		return status(204, "No messages", nil), nil
	}
	list := make([]any, 0, len(msgs))
	for _, m := range msgs {
		b, err := fromReceived(m, locked).MarshalBinary()
		if err != nil {
			return nil, err
		}
		entry := map[string]any{"message": b}
		if locked {
			entry["lock-token"] = goamqp.UUID(m.LockToken)
		}
		list = append(list, entry)
	}
	return status(200, "OK", map[string]any{"messages": list}), nil
}

func (c *connection) peek(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	from, _ := body["from-sequence-number"].(int64)
	count, _ := body["message-count"].(int32)
	if count <= 0 {
		count = 1
	}
	rcv, err := c.managementReceiver(e, false)
	if err != nil {
		return failure(err)
	}
	msgs, err := rcv.PeekMessages(ctx, int(count), &client.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil {
		return failure(err)
	}
	resp, err := encodedMessages(msgs, false)
	if err != nil {
		return status(500, err.Error(), nil)
	}
	return resp
}

func (c *connection) receiveDeferred(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	seqs, err := sequenceNumbers(body)
	if err != nil {
		return status(400, err.Error(), nil)
	}
	// receiver-settle-mode 1 (second) is peek-lock, 0 receive-and-delete.
	mode, _ := body["receiver-settle-mode"].(uint32)
	receiveAndDelete := mode == 0
	rcv, err := c.managementReceiver(e, receiveAndDelete)
	if err != nil {
		return failure(err)
	}
	msgs, err := rcv.ReceiveDeferredMessages(ctx, seqs, nil)
	if err != nil && len(msgs) == 0 {
		return failure(err)
	}
	if !receiveAndDelete {
		for _, m := range msgs {
			c.remember(e, rcv, m)
		}
	}
	resp, err := encodedMessages(msgs, !receiveAndDelete)
	if err != nil {
		return status(500, err.Error(), nil)
	}
	return resp
}

func (c *connection) updateDisposition(ctx context.Context, body map[string]any) *goamqp.Message {
	tokens, err := lockTokens(body)
	if err != nil {
		return status(400, err.Error(), nil)
	}
	statusName, _ := body["disposition-status"].(string)
	props, _ := body["properties-to-modify"].(map[string]any)
	var state amqp.DeliveryState
	switch statusName {
	case "completed":
		state = &amqp.Accepted{}
	case "abandoned":
		state = &amqp.Modified{MessageAnnotations: symbolKeys(props)}
	case "defered", "deferred":
		state = &amqp.Modified{UndeliverableHere: true, MessageAnnotations: symbolKeys(props)}
	case "suspended":
		info := symbolKeys(props)
		if info == nil {
			info = map[amqp.Symbol]any{}
		}
		if r, ok := body["deadletter-reason"].(string); ok {
			info[propDeadLetterReason] = r
		}
		if d, ok := body["deadletter-description"].(string); ok {
			info[propDeadLetterDescription] = d
		}
		state = &amqp.Rejected{Error: &amqp.Error{Condition: condDeadLetter, Info: info}}
	default:
		return status(400, fmt.Sprintf("unknown disposition-status %q", statusName), nil)
	}
	for _, t := range tokens {
		lk := c.lockOf(t)
		if lk == nil {
			return status(410, fmt.Sprintf("the lock %x is lost, or was not handed out through this node", t), nil)
		}
		if err := c.authorize(lk.entity, rightListen); err != nil {
			return status(401, err.Description, nil)
		}
		err := c.settle(ctx, lk, state)
		if err == nil || statusOf(err) == 410 {
			c.forget(t)
		}
		if err != nil {
			return failure(err)
		}
	}
	return status(200, "OK", map[string]any{})
}

func symbolKeys(m map[string]any) map[amqp.Symbol]any {
	if m == nil {
		return nil
	}
	out := make(map[amqp.Symbol]any, len(m))
	for k, v := range m {
		out[amqp.Symbol(k)] = v
	}
	return out
}

func (c *connection) schedule(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	list, ok := body["messages"].([]any)
	if !ok {
		return status(400, fmt.Sprintf("messages must be a list, not %T", body["messages"]), nil)
	}
	snd, err := c.h.Client.NewSender(e.Path, nil)
	if err != nil {
		return failure(err)
	}
	seqs := make([]int64, 0, len(list))
	for i, item := range list {
		entry, _ := item.(map[string]any)
		raw, _ := entry["message"].([]byte)
		var m goamqp.Message
		if err := m.UnmarshalBinary(raw); err != nil {
			return status(400, fmt.Sprintf("message %d: %v", i, err), nil)
		}
		cm, err := toClientMessage(&m)
		if err != nil {
			return status(400, fmt.Sprintf("message %d: %v", i, err), nil)
		}
		if cm.ScheduledEnqueueTime == nil {
			return status(400, fmt.Sprintf("message %d has no x-opt-scheduled-enqueue-time", i), nil)
		}
		got, err := snd.ScheduleMessages(ctx, []*client.Message{cm}, *cm.ScheduledEnqueueTime, nil)
		if err != nil {
			return failure(err)
		}
		seqs = append(seqs, got...)
	}
	return status(200, "OK", map[string]any{"sequence-numbers": seqs})
}

func (c *connection) cancelScheduled(ctx context.Context, e entity, body map[string]any) *goamqp.Message {
	seqs, err := sequenceNumbers(body)
	if err != nil {
		return status(400, err.Error(), nil)
	}
	snd, err := c.h.Client.NewSender(e.Path, nil)
	if err != nil {
		return failure(err)
	}
	if err := snd.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		return failure(err)
	}
	return status(200, "OK", map[string]any{})
}
