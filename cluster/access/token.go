package access

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// authorize checks the call's SharedAccessSignature token against need:
// signed with a key of the policy it names, unexpired, for a resource that
// covers every entity of need, by a policy whose scope covers them and
// whose rights include what need asks. It returns why the call is
// refused, or "", and an error when it cannot tell.
func (g *Guard) authorize(ctx context.Context, need requirement) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(sas.MetadataKey)
	if len(vals) == 0 {
		return "no SharedAccessSignature token: sign one with a policy's key (a connection string does) and send it in the \"authorization\" metadata", nil
	}
	if len(vals) > 1 {
		return "more than one authorization token", nil
	}
	return g.authorizeToken(vals[0], need)
}

// AuthorizeToken checks a SharedAccessSignature token for one of rights
// on entityPath ("" the namespace) as a gRPC call carrying it is checked:
// the front doors that take tokens another way (AMQP's $cbs) use it. It
// returns nil when the token grants it, an UNAUTHORIZED error saying why
// not, or another error when it cannot tell (the node is starting). A
// Guard without policies accepts every token.
func (g *Guard) AuthorizeToken(token, entityPath string, rights ...raftbusv1.AccessRight) error {
	if g.policies == nil {
		return nil
	}
	reason, err := g.authorizeToken(token, on(rights, entityPath))
	if err != nil {
		return err
	}
	if reason != "" {
		return apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED, "%s", reason)
	}
	return nil
}

func (g *Guard) authorizeToken(token string, need requirement) (string, error) {
	tok, err := sas.Parse(token)
	if err != nil {
		return "malformed token: " + err.Error(), nil
	}
	if now := g.now(); !tok.Expiry.After(now) {
		return fmt.Sprintf("the token expired at %s", tok.Expiry.UTC().Format("2006-01-02T15:04:05Z")), nil
	}
	res, err := tok.ResourcePath()
	if err != nil {
		return err.Error(), nil
	}
	for _, e := range need.entities {
		if reason, err := g.authorizeOn(tok, res, e, need.rights); reason != "" || err != nil {
			return reason, err
		}
	}
	return "", nil
}

// authorizeOn checks the token for one entity ("" the namespace).
func (g *Guard) authorizeOn(tok *sas.Token, res, entity string, want []raftbusv1.AccessRight) (string, error) {
	if !within(entity, res) {
		return fmt.Sprintf("the token is for %s, not %s", describe(res), describe(entity)), nil
	}
	// The policy the token names: at the entity's scope, or the
	// namespace's.
	scopes := []string{""}
	if s := scopeOf(entity); s != "" {
		scopes = []string{s, ""}
	}
	var found bool
	for _, scope := range scopes {
		p, err := g.policies.AccessPolicy(scope, tok.KeyName)
		if err != nil {
			return "", err
		}
		if p == nil {
			continue
		}
		found = true
		if !tok.Verify(p.GetPrimaryKey()) && !tok.Verify(p.GetSecondaryKey()) {
			continue
		}
		if !grants(p.GetRights(), want) {
			return fmt.Sprintf("policy %q of %s does not grant %s", p.GetName(), describe(scope), rightNames(want)), nil
		}
		return "", nil
	}
	if !found {
		return fmt.Sprintf("no policy %q covers %s", tok.KeyName, describe(entity)), nil
	}
	return fmt.Sprintf("the token's signature does not match a key of policy %q", tok.KeyName), nil
}

func describe(entity string) string {
	if entity == "" {
		return "the namespace"
	}
	return "entity " + entity
}

func rightNames(rs []raftbusv1.AccessRight) string {
	var names []string
	for _, r := range rs {
		names = append(names, strings.ToLower(strings.TrimPrefix(r.String(), "ACCESS_RIGHT_")))
	}
	return strings.Join(names, " or ")
}
