// Package console is the web console every node serves on its HTTP
// listener under /console/: the cluster's nodes and partitions, the
// entities with their counts, the messages of an entity or its dead-letter
// sub-queue page by page, a test message, and the dead-letter actions
// (resubmit, purge). Pages are rendered on the server from templates
// embedded in the binary, with a little JavaScript and no asset from
// elsewhere, so it works without internet access.
//
// The console is a client of the cluster's public gRPC API like any other:
// every call it makes is checked the same way. When the cluster checks
// access policies, the console asks for a connection string and makes
// each call with its tokens, so a key without Manage sees a refusal where
// it would delete. The key stays in the node's memory for the browser
// session (an HttpOnly, SameSite=Strict cookie names it) and is dropped on
// sign-out.
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/sas"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Config is what the console needs of the node that serves it.
type Config struct {
	// Connect makes a client of the cluster: with the given connection
	// string, or as the node itself when it is "" (only asked for when
	// Auth is false).
	Connect func(connectionString string) (*client.Client, error)
	// Auth: the cluster checks access policies; the console asks each
	// browser session for a connection string.
	Auth bool
	Log  *slog.Logger
}

// Prefix is where the console is served.
const Prefix = "/console/"

// callTimeout bounds the calls one page makes.
const callTimeout = 10 * time.Second

// sessionIdle is how long a signed-in browser session lasts unused.
const sessionIdle = 12 * time.Hour

type console struct {
	cfg   Config
	pages map[string]*template.Template

	mu       sync.Mutex
	sessions map[string]*session // by cookie value
	shared   *client.Client      // the node's own client (Auth false)
	// done remembers the dead-letter actions carried out, by the token
	// of the form that asked, so that a form sent twice acts once.
	done map[string]string
}

// session is one signed-in browser.
type session struct {
	client   *client.Client
	keyName  string
	csrf     string
	lastSeen time.Time
}

// Handler serves the console under Prefix.
func Handler(cfg Config) (http.Handler, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &console{cfg: cfg, pages: make(map[string]*template.Template), sessions: make(map[string]*session), done: make(map[string]string)}
	for _, page := range []string{"cluster", "entities", "messages", "signin", "result"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"signin", c.signInPage)
	mux.HandleFunc("POST "+Prefix+"signin", c.signIn)
	mux.HandleFunc("POST "+Prefix+"signout", c.signOut)
	mux.HandleFunc("GET "+Prefix+"{$}", c.with(c.clusterPage))
	mux.HandleFunc("GET "+Prefix+"cluster.json", c.with(c.clusterJSON))
	mux.HandleFunc("GET "+Prefix+"entities", c.with(c.entitiesPage))
	mux.HandleFunc("POST "+Prefix+"queues", c.withForm(c.createQueue))
	mux.HandleFunc("POST "+Prefix+"queues/{name}/delete", c.withForm(c.deleteQueue))
	mux.HandleFunc("POST "+Prefix+"queues/{name}/update", c.withForm(c.updateQueue))
	mux.HandleFunc("POST "+Prefix+"topics", c.withForm(c.createTopic))
	mux.HandleFunc("POST "+Prefix+"topics/{name}/delete", c.withForm(c.deleteTopic))
	mux.HandleFunc("POST "+Prefix+"subscriptions", c.withForm(c.createSubscription))
	mux.HandleFunc("POST "+Prefix+"subscriptions/delete", c.withForm(c.deleteSubscription))
	mux.HandleFunc("GET "+Prefix+"messages", c.with(c.messagesPage))
	mux.HandleFunc("POST "+Prefix+"send", c.withForm(c.sendMessage))
	mux.HandleFunc("POST "+Prefix+"deadletters/resubmit", c.withForm(c.resubmit))
	mux.HandleFunc("POST "+Prefix+"deadletters/purge", c.withForm(c.purge))
	return mux, nil
}

// request is what a page handler works with.
type request struct {
	w       http.ResponseWriter
	r       *http.Request
	ctx     context.Context
	client  *client.Client
	admin   *admin.Client
	session *session // nil without Auth
}

// with runs h with the browser session's client, sending a browser that
// has not signed in to the sign-in page.
func (c *console) with(h func(rq *request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rq, ok := c.start(w, r)
		if !ok {
			return
		}
		defer rq.cancel()
		if err := h(&rq.request); err != nil {
			c.fail(w, rq.session, err)
		}
	}
}

// withForm is with for a form: it must carry the session's form token,
// so that another site cannot make a signed-in browser act.
func (c *console) withForm(h func(rq *request) error) http.HandlerFunc {
	return c.with(func(rq *request) error {
		if err := rq.r.ParseForm(); err != nil {
			return badRequest("%v", err)
		}
		if rq.r.PostForm.Get("csrf") != c.csrfOf(rq.session) {
			return badRequest("the form is stale: load the page again")
		}
		return h(rq)
	})
}

type started struct {
	request
	cancel context.CancelFunc
}

func (c *console) start(w http.ResponseWriter, r *http.Request) (*started, bool) {
	var s *session
	var cl *client.Client
	if c.cfg.Auth {
		s = c.sessionOf(r)
		if s == nil {
			http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
			return nil, false
		}
		cl = s.client
	} else {
		var err error
		if cl, err = c.nodeClient(); err != nil {
			c.fail(w, nil, err)
			return nil, false
		}
		s = c.anonymous()
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	return &started{request: request{w: w, r: r, ctx: ctx, client: cl, admin: admin.NewFromClient(cl), session: s}, cancel: cancel}, true
}

// anonymous is the one session of a console without Auth: it carries the
// form token.
func (c *console) anonymous() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[""]
	if !ok {
		s = &session{csrf: newToken()}
		c.sessions[""] = s
	}
	return s
}

func (c *console) nodeClient() (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shared == nil {
		cl, err := c.cfg.Connect("")
		if err != nil {
			return nil, err
		}
		c.shared = cl
	}
	return c.shared, nil
}

const cookieName = "raftbus-console"

func (c *console) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s == nil {
		return nil
	}
	if time.Since(s.lastSeen) > sessionIdle {
		delete(c.sessions, ck.Value)
		s.client.Close()
		return nil
	}
	s.lastSeen = time.Now()
	return s
}

func (c *console) csrfOf(s *session) string {
	if s == nil {
		return ""
	}
	return s.csrf
}

func (c *console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, "signin", nil, map[string]any{"Auth": c.cfg.Auth})
}

func (c *console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Auth {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	if err := r.ParseForm(); err != nil {
		c.fail(w, nil, badRequest("%v", err))
		return
	}
	cs := r.PostForm.Get("connection_string")
	parsed, err := sas.ParseConnectionString(cs)
	var cl *client.Client
	if err == nil {
		cl, err = c.cfg.Connect(cs)
	}
	if err == nil {
		if err = checkKey(r.Context(), cl, parsed.EntityPath); err != nil {
			cl.Close()
		}
	}
	if err != nil {
		c.render(w, "signin", nil, map[string]any{"Auth": true, "Error": err.Error()})
		return
	}
	id := newToken()
	c.mu.Lock()
	c.sessions[id] = &session{client: cl, keyName: keyNameOf(cs), csrf: newToken(), lastSeen: time.Now()}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	// A key for one entity opens that entity's page; the cluster page
	// needs Manage on the namespace.
	next := Prefix
	if parsed.EntityPath != "" {
		next = Prefix + "messages?" + queryOf("entity", parsed.EntityPath)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// checkKey makes a call the key's policy may not grant, and tells a key
// the cluster does not know (a wrong key, a policy that does not exist)
// from one that only lacks the right: the first is refused at sign-in,
// the second finds its refusals page by page. A key for one entity peeks
// at it; another lists the queues.
func checkKey(ctx context.Context, cl *client.Client, entity string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var err error
	if entity != "" {
		var r *client.Receiver
		if r, err = (target{Path: entity}).receiver(cl, client.ReceiveModePeekLock); err == nil {
			_, err = r.PeekMessages(ctx, 1, nil)
		}
	} else {
		_, err = admin.NewFromClient(cl).ListQueues(ctx)
	}
	if errors.Is(err, client.ErrUnauthorized) && !strings.Contains(err.Error(), "signature") && !strings.Contains(err.Error(), "no policy") {
		return nil
	}
	return err
}

func (c *console) signOut(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.mu.Lock()
		if s := c.sessions[ck.Value]; s != nil && r.FormValue("csrf") == s.csrf {
			delete(c.sessions, ck.Value)
			s.client.Close()
		}
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1})
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// render writes page with data; the layout gets the session for its
// header and forms.
func (c *console) render(w http.ResponseWriter, page string, s *session, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["CSRF"] = c.csrfOf(s)
	data["SignedIn"] = s != nil && s.client != nil && c.cfg.Auth
	if s != nil {
		data["KeyName"] = s.keyName
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	if err := c.pages[page].Execute(w, data); err != nil {
		c.cfg.Log.Warn("console: render", "page", page, "err", err)
	}
}

// fail shows err: the cluster's refusal as it gave it, or a bad request.
func (c *console) fail(w http.ResponseWriter, s *session, err error) {
	code := http.StatusBadGateway
	var bad badRequestError
	var ce *client.Error
	switch {
	case errors.As(err, &bad):
		code = http.StatusBadRequest
	case errors.Is(err, client.ErrUnauthorized):
		code = http.StatusForbidden
	case errors.As(err, &ce):
		code = http.StatusConflict
	}
	w.WriteHeader(code)
	c.render(w, "result", s, map[string]any{"Title": "Refused", "Error": err.Error()})
}

type badRequestError struct{ msg string }

func (e badRequestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return badRequestError{fmt.Sprintf(format, args...)}
}

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
