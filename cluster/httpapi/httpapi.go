// Package httpapi is a node's HTTP listener for operators: Prometheus
// metrics, liveness and readiness probes and, when asked for, Go's
// profiles. It serves what it is given and knows nothing of the node.
package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is what the listener serves.
type Config struct {
	// Metrics is served at /metrics.
	Metrics prometheus.Gatherer
	// Ready answers /readyz: nil is ready (200), an error is not (503,
	// with the error as the body).
	Ready func() error
	// Pprof serves Go's profiles under /debug/pprof/. Profiles show what
	// the node is doing and a CPU profile costs while it runs: Serve
	// refuses them on an address other than loopback.
	Pprof bool
	// Console, when set, is served under /console/ (and / leads there).
	Console http.Handler
}

// Handler serves /metrics, /healthz (the process answers: 200), /readyz,
// the console when given and, with cfg.Pprof, /debug/pprof/.
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := cfg.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if cfg.Console != nil {
		mux.Handle("/console/", cfg.Console)
		mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusSeeOther))
	}
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Server is a running listener.
type Server struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// Serve listens on addr ("127.0.0.1:9400"; port 0 picks one) and serves
// Handler(cfg) until Close.
func Serve(addr string, cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.Pprof && !isLoopback(addr) {
		return nil, fmt.Errorf("profiles are served on a loopback address only, such as 127.0.0.1:9400, not %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	s := &Server{
		// The header timeout keeps a slow client from holding a
		// connection; no write timeout, as a CPU profile takes 30 s.
		srv:  &http.Server{Handler: Handler(cfg), ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the listener got.
func (s *Server) Addr() string { return s.addr }

// Close stops the listener and the requests it is serving.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
