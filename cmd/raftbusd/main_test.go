package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/raftbus/raftbus/cluster"
)

func TestFlagsOverrideTheConfigFileWhichOverridesDefaults(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "node.json")
	os.WriteFile(cfg, []byte(`{"node_id": "n7", "listen": "127.0.0.1:7499", "partitions": 4}`), 0o644)
	opts, err := parse([]string{"--config", cfg, "--listen", "127.0.0.1:7500"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.NodeID != "n7" || opts.Listen != "127.0.0.1:7500" || opts.Partitions != 4 || opts.DataDir != "raftbus-data" {
		t.Fatalf("got %+v", opts)
	}
}

func TestStartUpErrorsSayWhatIsWrong(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	owned := t.TempDir()
	os.WriteFile(filepath.Join(owned, "node.json"), []byte(`{"node_id":"n1"}`), 0o640)
	badConfig := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(badConfig, []byte(`{"node_idd": "x"}`), 0o644)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"port in use", []string{"--listen", busy.Addr().String(), "--data-dir", t.TempDir()}, "already in use"},
		{"data dir of another node", []string{"--node-id", "n2", "--listen", "127.0.0.1:0", "--data-dir", owned}, `belongs to node "n1"`},
		{"peers and join", []string{"--peers", "n1=127.0.0.1:1", "--join", "127.0.0.1:2", "--data-dir", t.TempDir()}, "give one of them"},
		{"malformed peers", []string{"--peers", "n1", "--data-dir", t.TempDir()}, "not id=host:port"},
		{"unknown config setting", []string{"--config", badConfig}, "unknown field"},
		{"partitions out of range", []string{"--partitions", "0"}, "--partitions"},
		{"stray argument", []string{"serve"}, "unexpected argument"},
		{"profiles off loopback", []string{"--http", "0.0.0.0:0", "--pprof", "--data-dir", t.TempDir()}, "loopback"},
		{"profiles without a listener", []string{"--http", "", "--pprof", "--data-dir", t.TempDir()}, "--http"},
		{"reachable without TLS", []string{"--listen", "0.0.0.0:0", "--data-dir", t.TempDir()}, "--insecure"},
		{"insecure and TLS", []string{"--listen", "0.0.0.0:0", "--insecure", "--tls-ca", "ca.pem", "--tls-cert", "n1.pem", "--tls-key", "n1-key.pem", "--data-dir", t.TempDir()}, "give one or the other"},
		{"reachable with TLS but no auth", []string{"--listen", "0.0.0.0:0", "--tls-ca", "ca.pem", "--tls-cert", "n1.pem", "--tls-key", "n1-key.pem", "--data-dir", t.TempDir()}, "--auth"},
		{"amqp off loopback", []string{"--amqp", "0.0.0.0:0", "--data-dir", t.TempDir()}, "--insecure"},
		{"amqp port in use", []string{"--amqp", busy.Addr().String(), "--data-dir", t.TempDir()}, "--amqp"},
		{"management off loopback", []string{"--management", "0.0.0.0:0", "--data-dir", t.TempDir()}, "--insecure"},
		{"management port in use", []string{"--management", busy.Addr().String(), "--data-dir", t.TempDir()}, "--management"},
		{"auth without TLS", []string{"--auth", "--data-dir", t.TempDir()}, "--auth needs TLS"},
		{"half the TLS files", []string{"--tls-cert", "n1.pem", "--data-dir", t.TempDir()}, "TLS needs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestHTTPListenerServesProbesAndProfilesWhileTheNodeStarts(t *testing.T) {
	addr := "127.0.0.1:0"
	var started atomic.Pointer[cluster.Node]
	srv, err := serveHTTP(options{HTTP: &addr, Pprof: true}, &started, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for path, want := range map[string]int{
		"/healthz":                       http.StatusOK,
		"/readyz":                        http.StatusServiceUnavailable, // no node yet
		"/metrics":                       http.StatusOK,
		"/debug/pprof/goroutine?debug=1": http.StatusOK,
	} {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %s, want %d\n%s", path, resp.Status, want, body)
		}
	}
}

func TestDefaultAMQPAddressFollowsTheGRPCPort(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:7400": "127.0.0.1:5672",
		"0.0.0.0:7403":   "127.0.0.1:5675",
		"127.0.0.1:0":    "127.0.0.1:0",
		"127.0.0.1:1000": "127.0.0.1:0",
	} {
		if got := defaultAMQPAddr(listen); got != want {
			t.Errorf("defaultAMQPAddr(%q) = %q, want %q", listen, got, want)
		}
	}
}

func TestDefaultManagementAddressFollowsTheGRPCPort(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:7400": "127.0.0.1:5300",
		"0.0.0.0:7401":   "127.0.0.1:5301",
		"127.0.0.1:0":    "127.0.0.1:0",
		"127.0.0.1:2000": "127.0.0.1:0",
	} {
		if got := loopbackAt(listen, managementPortOffset); got != want {
			t.Errorf("management default for %q = %q, want %q", listen, got, want)
		}
	}
}

func TestDefaultHTTPAddressFollowsTheGRPCPort(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:7400": "127.0.0.1:9400",
		"0.0.0.0:7403":   "127.0.0.1:9403",
		"127.0.0.1:0":    "127.0.0.1:0",
		"[::1]:65000":    "127.0.0.1:0",
	} {
		if got := defaultHTTPAddr(listen); got != want {
			t.Errorf("defaultHTTPAddr(%q) = %q, want %q", listen, got, want)
		}
	}
}

func TestTLSCertificateMustBeTheNodes(t *testing.T) {
	dir := t.TempDir()
	if err := runCerts([]string{"init", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := runCerts([]string{"node", "--dir", dir, "--id", "n2", "--host", "127.0.0.1"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"--node-id", "n1", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, "n2.pem"), "--tls-key", filepath.Join(dir, "n2-key.pem")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "node n2's, not node n1's") {
		t.Fatalf("started with another node's certificate: %v", err)
	}
}
