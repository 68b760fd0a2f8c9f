package access

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/raftbus/raftbus/cluster/apierror"
	"github.com/raftbus/raftbus/cluster/identity"
	"github.com/raftbus/raftbus/internal/certs"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// Services are the gRPC service name prefixes by who may call them.
var (
	internalPrefixes = []string{"/raftbus.raft.v1.", "/raftbus.cluster.v1."}
	publicPrefixes   = []string{"/raftbus.v1.", "/grpc.reflection."}
	openPrefixes     = []string{"/grpc.health.v1."}
)

// Policies are the shared access policies a Guard checks tokens against
// (the metadata group's).
type Policies interface {
	// AccessPolicy returns the policy named name at the scope entityPath
	// ("" for the namespace), or nil; an error when the policies cannot
	// be read yet (the node is starting). The Guard does not modify it.
	AccessPolicy(entityPath, name string) (*raftbusv1.AccessPolicy, error)
}

// Guard checks every call against the caller's certificate and, with
// Policies, its SharedAccessSignature token.
type Guard struct {
	log *slog.Logger
	// policies, when set, makes every public call need a token (see
	// authorize); nil: a certificate of the cluster CA is enough.
	policies Policies
	now      func() time.Time

	mu     sync.Mutex
	logged map[string]time.Time // refusals logged, by caller and method, for rate limiting
}

// NewGuard returns a Guard that logs refusals to log. With policies set,
// public calls need a token signed with one of their keys; clock is the
// time tokens expire by.
func NewGuard(log *slog.Logger, policies Policies, clock func() time.Time) *Guard {
	return &Guard{log: log, policies: policies, now: clock, logged: make(map[string]time.Time)}
}

// Unary is the guard as a unary server interceptor.
func (g *Guard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.check(ctx, info.FullMethod, requirementOf(req)); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is the guard as a stream server interceptor. A ReceiveStream is
// checked on its first request, which names its entity, as the Receive
// of each of its grants is (the grants pass through Unary as Receives);
// other public streams (reflection) need Manage on the namespace.
func (g *Guard) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod == raftbusv1.MessagingService_ReceiveStream_FullMethodName {
		return handler(srv, &openGuard{ServerStream: ss, g: g, method: info.FullMethod})
	}
	if err := g.check(ss.Context(), info.FullMethod, namespaceManage); err != nil {
		return err
	}
	return handler(srv, ss)
}

// openGuard checks the first request of a stream, whose requirement it
// names, before the handler sees it.
type openGuard struct {
	grpc.ServerStream
	g       *Guard
	method  string
	checked bool
}

func (s *openGuard) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.checked {
		return nil
	}
	s.checked = true
	return s.g.check(s.Context(), s.method, requirementOf(m))
}

// check returns the gRPC status refusing the call, or nil.
func (g *Guard) check(ctx context.Context, method string, need requirement) error {
	if hasPrefix(method, openPrefixes) {
		return nil
	}
	caller, addr := callerOf(ctx)
	var reason string
	switch {
	case hasPrefix(method, internalPrefixes):
		reason = g.checkNode(ctx, caller)
	case hasPrefix(method, publicPrefixes):
		switch {
		case caller.Kind == certs.Node:
			// A node forwarding a call: the node the client called
			// checked it.
		case g.policies != nil:
			var err error
			if reason, err = g.authorize(ctx, need); err != nil {
				return apierror.Status(err)
			}
		case caller.Kind == certs.Unknown:
			reason = "a client certificate signed by the cluster CA is required"
		}
	default:
		reason = "no such service"
	}
	if reason == "" {
		return nil
	}
	g.logRefusal(caller, addr, method, reason)
	return apierror.Status(apierror.Errorf(raftbusv1.ErrorReason_ERROR_REASON_UNAUTHORIZED, "%s: %s", method, reason))
}

func (g *Guard) checkNode(ctx context.Context, caller certs.Identity) string {
	if caller.Kind != certs.Node {
		return "only the nodes of the cluster may call it, and the caller presented " + caller.String()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if claimed := md.Get(identity.NodeIDKey); len(claimed) > 0 && claimed[0] != caller.Name {
		return "the caller names itself node " + claimed[0] + " but its certificate is node " + caller.Name + "'s"
	}
	return ""
}

// callerOf returns who presented the verified certificate of ctx's
// connection (Unknown when none was verified) and from where.
func callerOf(ctx context.Context) (certs.Identity, string) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return certs.Identity{}, ""
	}
	addr := ""
	if p.Addr != nil {
		addr = p.Addr.String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return certs.Identity{}, addr
	}
	return certs.IdentityOf(info.State.VerifiedChains[0][0]), addr
}

func hasPrefix(method string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// logRefusal logs a refusal, at most once a minute per caller, address
// and method, so that a misconfigured client cannot flood the log.
func (g *Guard) logRefusal(caller certs.Identity, addr, method, reason string) {
	key := caller.String() + "\x00" + addr + "\x00" + method
	now := time.Now()
	g.mu.Lock()
	last, seen := g.logged[key]
	if !seen || now.Sub(last) > time.Minute {
		g.logged[key] = now
		if len(g.logged) > 1024 {
			clear(g.logged)
		}
	}
	g.mu.Unlock()
	if seen && now.Sub(last) <= time.Minute {
		return
	}
	g.log.Warn("call refused", "method", method, "caller", caller.String(), "from", addr, "reason", reason)
}
