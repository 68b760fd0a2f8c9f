package mgmtapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/raftbus/raftbus/cluster/service"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// MaxBodyBytes is the largest request body read: a description is a
// few kilobytes, a rule with many parameters tens.
const MaxBodyBytes = 1 << 20

// maxInFlight is how many requests the handler serves at once; beyond
// it a request is answered 429, which the SDKs retry.
const maxInFlight = 64

// callTimeout bounds one request's calls to the cluster (Service Bus's
// own timeout for a management operation).
const callTimeout = 60 * time.Second

// TokenChecker checks a SharedAccessSignature token against the access
// policies: nil when it grants one of rights on entityPath ("" the
// namespace), an UNAUTHORIZED error saying why not, or another error
// when it cannot tell yet. The node's access guard is one, the same the
// gRPC and AMQP front doors check tokens with.
type TokenChecker interface {
	AuthorizeToken(token, entityPath string, rights ...raftbusv1.AccessRight) error
}

// Config is what the handler needs of the node serving it.
type Config struct {
	// Admin is the cluster's admin service, reached as the node itself
	// (the node's in-process connection): every call goes to the
	// metadata leader from whichever node takes it.
	Admin raftbusv1.AdminServiceClient
	// Tokens, when set, checks the token of every request for Manage on
	// what it names. Unset, every request may do anything: only for a
	// node without access policies.
	Tokens TokenChecker
	Log    *slog.Logger
}

// Handler serves the management REST API.
type Handler struct {
	cfg      Config
	inFlight chan struct{}
}

// New is the handler of cfg.
func New(cfg Config) *Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, inFlight: make(chan struct{}, maxInFlight)}
}

// request is one request being served.
type request struct {
	h       *Handler
	w       http.ResponseWriter
	r       *http.Request
	ctx     context.Context
	version apiVersion
	// base is https://host, as the client named the namespace.
	base string
	host string
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		writeError(w, r, &httpError{status: http.StatusTooManyRequests, detail: fmt.Sprintf("more than %d management requests at once: retry shortly", maxInFlight)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	rq := &request{h: h, w: w, r: r, ctx: ctx, host: r.Host}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	rq.base = scheme + "://" + r.Host
	if err := rq.serve(); err != nil {
		he := toHTTPError(err)
		id := writeError(w, r, he)
		if he.status >= 500 {
			h.cfg.Log.Warn("management request failed", "method", r.Method, "path", r.URL.Path, "status", he.status, "err", he.detail, "tracking_id", id)
		}
	}
}

func (rq *request) serve() error {
	v := rq.r.URL.Query().Get("api-version")
	switch {
	case v == "":
		rq.version = defaultVersion
	case versionForm.MatchString(v):
		rq.version = apiVersion(v)
	default:
		return badRequest("api-version %q is not a version such as 2021-05", v)
	}
	t, err := parseTarget(rq.r.URL.Path)
	if err != nil {
		return err
	}
	if err := rq.authorize(); err != nil {
		return err
	}
	allowed := []string{http.MethodGet}
	if t.kind == targetEntity || t.kind == targetSubscription || t.kind == targetRule {
		allowed = append(allowed, http.MethodPut, http.MethodDelete)
	}
	if !slices.Contains(allowed, rq.r.Method) {
		rq.w.Header().Set("Allow", strings.Join(allowed, ", "))
		return &httpError{status: http.StatusMethodNotAllowed, detail: fmt.Sprintf("%s is not allowed on %s: %s", rq.r.Method, rq.r.URL.Path, strings.Join(allowed, ", "))}
	}
	switch t.kind {
	case targetNamespace:
		return rq.namespaceInfo()
	case targetQueues:
		return rq.listQueues()
	case targetTopics:
		return rq.listTopics()
	case targetSubscriptions:
		return rq.listSubscriptions(t.topic)
	case targetRules:
		return rq.listRules(t.topic, t.sub)
	case targetEntity:
		return rq.entity(t.topic)
	case targetSubscription:
		return rq.subscription(t.topic, t.sub)
	default:
		return rq.rule(t.topic, t.sub, t.rule)
	}
}

// authorize checks the request's token for Manage on what its path
// names (a queue or topic's policy, or the namespace's), as Service Bus
// asks Manage of every management operation. The SDKs sign a token for
// the namespace (Python) or for the request's URL (Go); either covers
// the path.
func (rq *request) authorize() error {
	if rq.h.cfg.Tokens == nil {
		return nil
	}
	token := rq.r.Header.Get("Authorization")
	if token == "" {
		return &httpError{status: http.StatusUnauthorized, detail: "no SharedAccessSignature token in the Authorization header: sign one with a policy's key (a connection string does)"}
	}
	return rq.h.cfg.Tokens.AuthorizeToken(token, strings.Trim(rq.r.URL.Path, "/"), raftbusv1.AccessRight_ACCESS_RIGHT_MANAGE)
}

// readEntry reads a PUT's body, an Atom entry, and returns the
// description its content holds.
func (rq *request) readEntry() (*element, error) {
	body, err := io.ReadAll(http.MaxBytesReader(rq.w, rq.r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, badRequest("the request body is larger than %d bytes", MaxBodyBytes)
		}
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	root, err := parseXML(body)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if root.name.Local != "entry" {
		return nil, badRequest("the body must be an Atom entry, not a %s element", root.name.Local)
	}
	content := root.child("content")
	if content == nil || len(content.children) != 1 {
		return nil, badRequest("the entry must have a content element holding one description")
	}
	return content.children[0], nil
}

// targetKind is what a path names.
type targetKind int

const (
	targetNamespace targetKind = iota
	targetQueues
	targetTopics
	targetEntity // a queue or topic
	targetSubscriptions
	targetSubscription
	targetRules
	targetRule
)

type target struct {
	kind             targetKind
	topic, sub, rule string // topic is the queue or topic of targetEntity
}

// parseTarget reads a request path: the keywords ($namespaceinfo,
// $Resources/Queues, Subscriptions, Rules) in any case, as the SDKs
// write them differently; entity names as given.
func parseTarget(path string) (target, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	notFound := &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("no management resource at %s", path)}
	switch {
	case len(segs) == 1 && segs[0] == "":
		return target{}, notFound
	case len(segs) == 1 && strings.EqualFold(segs[0], "$namespaceinfo"):
		return target{kind: targetNamespace}, nil
	case strings.EqualFold(segs[0], "$Resources"):
		if len(segs) == 2 && strings.EqualFold(segs[1], "Queues") {
			return target{kind: targetQueues}, nil
		}
		if len(segs) == 2 && strings.EqualFold(segs[1], "Topics") {
			return target{kind: targetTopics}, nil
		}
		return target{}, notFound
	}
	for i := 1; i < len(segs); i++ {
		if !strings.EqualFold(segs[i], "Subscriptions") {
			continue
		}
		t := target{topic: strings.Join(segs[:i], "/")}
		if err := service.CheckEntityName("topic", t.topic); err != nil {
			return target{}, err
		}
		rest := segs[i+1:]
		switch {
		case len(rest) == 0:
			t.kind = targetSubscriptions
			return t, nil
		case len(rest) == 1:
			t.kind, t.sub = targetSubscription, rest[0]
		case len(rest) == 2 && strings.EqualFold(rest[1], "Rules"):
			t.kind, t.sub = targetRules, rest[0]
		case len(rest) == 3 && strings.EqualFold(rest[1], "Rules"):
			t.kind, t.sub, t.rule = targetRule, rest[0], rest[2]
			if err := service.CheckChildName("rule", t.rule); err != nil {
				return target{}, err
			}
		default:
			return target{}, notFound
		}
		if err := service.CheckChildName("subscription", t.sub); err != nil {
			return target{}, err
		}
		return t, nil
	}
	t := target{kind: targetEntity, topic: strings.Join(segs, "/")}
	if err := service.CheckEntityName("entity", t.topic); err != nil {
		return target{}, err
	}
	return t, nil
}

// namespaceName is the namespace's name as Service Bus gives it: the
// first label of the host the client named.
func namespaceName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if ip := net.ParseIP(host); ip == nil {
		host, _, _ = strings.Cut(host, ".")
	}
	return host
}
