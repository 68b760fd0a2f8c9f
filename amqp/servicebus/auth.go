package servicebus

import (
	"errors"
	"fmt"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/raftbus/raftbus/amqp"
	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Access control. A Service Bus client proves its rights by putting
// SharedAccessSignature tokens on the $cbs node, one per entity it uses
// (the token's audience); every link it attaches and every management
// operation then needs a token of the connection that grants the right
// on that entity. Tokens are checked again at each use, so that one that
// expired, or whose policy was removed or its key rotated, stops working
// (the SDKs put a fresh token before the old one expires).

// TokenChecker checks a SharedAccessSignature token against the access
// policies: nil when it grants one of rights on entityPath, an
// UNAUTHORIZED error saying why not, or another error when it cannot
// tell yet. The node's access guard is one.
type TokenChecker interface {
	AuthorizeToken(token, entityPath string, rights ...raftbusv1.AccessRight) error
}

var (
	rightSend   = raftbusv1.AccessRight_ACCESS_RIGHT_SEND
	rightListen = raftbusv1.AccessRight_ACCESS_RIGHT_LISTEN
	rightManage = raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE
)

// The application properties of a $cbs put-token request.
const (
	cbsOperation = "operation"
	cbsAudience  = "name"
)

// putToken keeps a token for its audience. One that is malformed or
// expired is refused with status 401 at once; its signature and rights
// are checked at each use, against the entity used (the audience names
// it lower-cased, which is no entity path when the entity's name has
// capitals).
func (c *connection) putToken(req *goamqp.Message) *goamqp.Message {
	if op, _ := req.ApplicationProperties[cbsOperation].(string); op != "put-token" {
		return cbsStatus(400, fmt.Sprintf("$cbs operation %q is not supported", op))
	}
	audience, _ := req.ApplicationProperties[cbsAudience].(string)
	token, _ := req.Value.(string)
	if c.h.Tokens == nil {
		// No access policies: a token grants nothing and is answered as
		// Service Bus answers a valid one.
		return cbsStatus(202, "Accepted")
	}
	if token == "" {
		return cbsStatus(400, "the put-token request carries no token (a string body)")
	}
	tok, err := sas.Parse(token)
	if err != nil {
		return cbsStatus(401, "malformed token: "+err.Error())
	}
	if !tok.Expiry.After(time.Now()) {
		return cbsStatus(401, "the token expired at "+tok.Expiry.UTC().Format(time.RFC3339))
	}
	c.mu.Lock()
	c.tokens[strings.ToLower(audience)] = token
	c.mu.Unlock()
	return cbsStatus(202, "Accepted")
}

func cbsStatus(code int32, description string) *goamqp.Message {
	return &goamqp.Message{ApplicationProperties: map[string]any{"status-code": code, "status-description": description}}
}

// authorize returns nil when one of the connection's tokens grants right
// on e, else the AMQP error refusing it.
func (c *connection) authorize(e entity, right raftbusv1.AccessRight) *amqp.Error {
	path := e.Path
	if e.SubQueue == client.SubQueueDeadLetter {
		path += deadLetterSuffix
	}
	return c.authorizePath(path, right)
}

func (c *connection) authorizePath(path string, right raftbusv1.AccessRight) *amqp.Error {
	if c.h.Tokens == nil {
		return nil
	}
	c.mu.Lock()
	tokens := make([]string, 0, len(c.tokens))
	for _, t := range c.tokens {
		tokens = append(tokens, t)
	}
	c.mu.Unlock()
	if len(tokens) == 0 {
		return &amqp.Error{Condition: amqp.ErrCondUnauthorized, Description: fmt.Sprintf("no token for %s: put a SharedAccessSignature token on $cbs first", path)}
	}
	var refused error
	for _, t := range tokens {
		err := c.h.Tokens.AuthorizeToken(t, path, right)
		if err == nil {
			return nil
		}
		if !isUnauthorized(err) {
			return &amqp.Error{Condition: condServerBusy, Description: err.Error()}
		}
		refused = err
	}
	return &amqp.Error{Condition: amqp.ErrCondUnauthorized, Description: fmt.Sprintf("%s on %s: %v", rightName(right), path, refused)}
}

func isUnauthorized(err error) bool {
	var ae *apierror.Error
	return errors.As(err, &ae) && ae.Reason == raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED
}

func rightName(r raftbusv1.AccessRight) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ACCESS_RIGHT_"))
}

// managementRight is the right a $management operation needs on its
// entity: scheduling is sending, changing rules is managing, everything
// else is receiving.
func managementRight(op string) raftbusv1.AccessRight {
	switch op {
	case "com.microsoft:schedule-message", "com.microsoft:cancel-scheduled-message":
		return rightSend
	case "com.microsoft:add-rule", "com.microsoft:remove-rule":
		return rightManage
	}
	return rightListen
}
