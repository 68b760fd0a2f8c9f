package servicebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
)

// Handler serves Service Bus over AMQP connections with a raftbus client.
type Handler struct {
	// Client reaches the cluster; the Handler does not close it.
	Client *client.Client
	Log    *slog.Logger
	// Tokens, when set, checks the tokens clients put on $cbs: every link
	// and management operation then needs a token granting its right on
	// the entity. Unset, tokens are taken without a check.
	Tokens TokenChecker

	locks locks
}

var _ amqp.Handler = (*Handler)(nil)

// Connect serves one connection.
func (h *Handler) Connect(c *amqp.Conn) amqp.ConnHandler {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &connection{h: h, conn: c, log: log.With("remote", c.RemoteAddr().String()), admin: admin.NewFromClient(h.Client),
		replyTo: map[string]*amqp.Link{}, nodeReply: map[string]*amqp.Link{}, receivers: map[string]*client.Receiver{},
		sessions: map[string]*client.SessionReceiver{}, replySession: map[string]string{}, linkSession: map[string]string{},
		tokens: map[string]string{}}
}

// connection is the Service Bus state of one AMQP connection: its
// management reply links, by address, and the sessions its receivers
// hold.
type connection struct {
	h     *Handler
	conn  *amqp.Conn
	log   *slog.Logger
	admin *admin.Client

	// wg counts the goroutines serving links (receive loops, session
	// releases); Closed waits for them.
	wg sync.WaitGroup

	mu sync.Mutex
	// replyTo are the management receiver links by their target
	// address, which requests name as their reply-to.
	replyTo map[string]*amqp.Link
	// nodeReply are the same links by the node they receive from ($cbs,
	// <entity>/$management): the answer to a request without a reply-to
	// (what uamqp, under the Python SDK, sends) goes to the receiver of
	// the node the request was sent to.
	nodeReply map[string]*amqp.Link
	// replySession is the session of a session receiver's management
	// reply link, by address.
	replySession map[string]string
	// linkSession is the session a session receiver link holds, by link
	// name.
	linkSession map[string]string
	receivers   map[string]*client.Receiver        // per entity and mode, for management receives
	sessions    map[string]*client.SessionReceiver // held by receiver links, by sessionKey
	// tokens are the tokens put on $cbs, by lower-cased audience.
	tokens map[string]string
}

// Closed waits for the link goroutines, which end with their links.
func (c *connection) Closed() { c.wg.Wait() }

// spawn runs f on a goroutine Closed waits for.
func (c *connection) spawn(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// Attach routes a link by its address: $cbs, an entity's $management
// node, or the entity itself.
func (c *connection) Attach(l *amqp.Link) error {
	addr := ""
	if l.Incoming {
		if l.Target != nil {
			addr = l.Target.Address
		}
	} else if l.Source != nil {
		addr = l.Source.Address
	}
	if addr == cbsAddress {
		return c.attachManagement(l, addr, entity{}, true)
	}
	e, err := parseAddress(addr)
	if err != nil {
		return &amqp.Error{Condition: amqp.ErrCondNotFound, Description: err.Error()}
	}
	e = c.resolve(l.Context(), e)
	if e.Management {
		return c.attachManagement(l, addr, e, false)
	}
	if l.Incoming {
		if err := c.authorize(e, rightSend); err != nil {
			return err
		}
		return c.attachSender(l, e)
	}
	if err := c.authorize(e, rightListen); err != nil {
		return err
	}
	return c.attachReceiver(l, e)
}

// remember keeps a lock of entity e for settlement, on a receiver link
// or any connection's $management node.
func (c *connection) remember(e entity, rcv *client.Receiver, m *client.ReceivedMessage) {
	c.h.locks.add(e, rcv, m)
}

func (c *connection) lockOf(token [16]byte) *lock { return c.h.locks.get(token) }

func (c *connection) forget(token [16]byte) { c.h.locks.remove(token) }

// checkEntity refuses a link to an entity that does not exist, as
// Service Bus does at attach, rather than failing each operation later.
// For a sender it returns the entity's largest message, in bytes.
func (c *connection) checkEntity(ctx context.Context, e entity, sender bool) (uint64, error) {
	var err error
	var maxKB int64
	switch {
	case e.Subscription != "":
		if sender {
			return 0, &amqp.Error{Condition: amqp.ErrCondNotAllowed, Description: "cannot send to a subscription: send to its topic"}
		}
		_, err = c.admin.GetSubscription(ctx, e.Topic, e.Subscription)
	case sender:
		var q *admin.QueueProperties
		if q, err = c.admin.GetQueue(ctx, e.Path); err == nil {
			maxKB = q.GetMaxMessageSizeInKilobytes()
		} else if isNotFound(err) {
			var t *admin.TopicProperties
			if t, err = c.admin.GetTopic(ctx, e.Path); err == nil {
				maxKB = t.GetMaxMessageSizeInKilobytes()
			}
		}
	default:
		if _, err = c.admin.GetQueue(ctx, e.Path); isNotFound(err) {
			if _, terr := c.admin.GetTopic(ctx, e.Path); terr == nil {
				return 0, &amqp.Error{Condition: amqp.ErrCondNotAllowed, Description: fmt.Sprintf("%s is a topic: receive from one of its subscriptions", e.Path)}
			}
		}
	}
	if err != nil {
		return 0, toAMQPError(err)
	}
	return uint64(maxKB) * 1024, nil
}

func isNotFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

// Error conditions of Service Bus that the SDKs map to their own errors.
const (
	condLockLost        amqp.Symbol = "com.microsoft:message-lock-lost"
	condSessionLockLost amqp.Symbol = "com.microsoft:session-lock-lost"
	condServerBusy      amqp.Symbol = "com.microsoft:server-busy"
	condAlreadyExists   amqp.Symbol = "com.microsoft:entity-already-exists"
	condTimeout         amqp.Symbol = "com.microsoft:timeout"
	condDeadLetter      amqp.Symbol = "com.microsoft:dead-letter"
	condEntityDisabled  amqp.Symbol = "com.microsoft:entity-disabled"
	condArgumentError   amqp.Symbol = "com.microsoft:argument-error"
)

// toAMQPError maps a raftbus client error onto the AMQP condition a
// Service Bus SDK understands.
func toAMQPError(err error) *amqp.Error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return &amqp.Error{Condition: condTimeout, Description: err.Error()}
		}
		return &amqp.Error{Condition: amqp.ErrCondInternal, Description: err.Error()}
	}
	cond := amqp.ErrCondInternal
	switch ce.Code {
	case client.CodeNotFound:
		cond = amqp.ErrCondNotFound
	case client.CodeLockLost:
		cond = condLockLost
	case client.CodeSessionLockLost:
		cond = condSessionLockLost
	case client.CodeSessionCannotBeLocked:
		cond = condSessionLocked
	case client.CodeInvalidArgument:
		cond = condArgumentError
	case client.CodeUnauthorized:
		cond = amqp.ErrCondUnauthorized
	case client.CodeQuotaExceeded:
		cond = amqp.ErrCondResourceLimit
	case client.CodeMessageSizeExceeded:
		cond = amqp.ErrCondMessageTooLarge
	case client.CodeServerBusy:
		cond = condServerBusy
	case client.CodeAlreadyExists:
		cond = condAlreadyExists
	}
	return &amqp.Error{Condition: cond, Description: ce.Message}
}

// statusOf is the management status code of an error.
func statusOf(err error) int32 {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case client.CodeNotFound:
			return 404
		case client.CodeLockLost, client.CodeSessionLockLost:
			return 410
		case client.CodeSessionCannotBeLocked, client.CodeAlreadyExists:
			return 409
		case client.CodeInvalidArgument:
			return 400
		case client.CodeUnauthorized:
			return 401
		case client.CodeQuotaExceeded, client.CodeMessageSizeExceeded:
			return 403
		case client.CodeServerBusy:
			return 503
		}
	}
	return 500
}
