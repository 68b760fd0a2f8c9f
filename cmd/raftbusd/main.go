// Command raftbusd is the raftbus server: one node of a cluster.
//
// With no flags it starts a single-node cluster on 127.0.0.1:7400 with its
// data in ./raftbus-data. See -help for forming and joining clusters.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/cluster/clock"
	"github.com/raftbus/raftbus/internal/gctune"
	"github.com/raftbus/raftbus/internal/grpcbuf"
)

// options are the node's settings, from flags and an optional JSON file
// with the same names (flags win).
type options struct {
	NodeID     string `json:"node_id"`
	Listen     string `json:"listen"`
	Advertise  string `json:"advertise"`
	DataDir    string `json:"data_dir"`
	Peers      string `json:"peers"`
	Join       string `json:"join"`
	Partitions uint   `json:"partitions"`
	// MaxClockOffset is a Go duration ("500ms").
	MaxClockOffset string `json:"max_clock_offset"`
	// QuiesceAfter is a Go duration; 0 never.
	QuiesceAfter string `json:"quiesce_after"`
	LogLevel     string `json:"log_level"`
	LogFormat    string `json:"log_format"`
	// HTTP is the host:port of the node's HTTP listener (metrics,
	// probes, profiles); empty: none. Unset: loopback, at the gRPC port
	// plus httpPortOffset.
	HTTP *string `json:"http"`
	// AMQP is the host:port of the node's AMQP 1.0 listener for the Azure
	// Service Bus SDKs; empty: none. Unset: loopback, at the gRPC port
	// plus amqpPortOffset (5672 for 7400).
	AMQP *string `json:"amqp"`
	// Management is the host:port of the node's listener of the Service
	// Bus management REST API (ATOM over HTTPS) for the SDKs'
	// administration clients; empty: none. Unset: loopback, at the gRPC
	// port plus managementPortOffset (5300 for 7400).
	Management *string `json:"management"`
	// Pprof serves Go's profiles on the HTTP listener, which must then be
	// on loopback.
	Pprof bool `json:"pprof"`
	// TLSCert, TLSKey and TLSCA are the node certificate, its key and the
	// cluster CA (PEM files); all or none.
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	TLSCA   string `json:"tls_ca"`
	// Auth makes every public call need a SharedAccessSignature token.
	Auth bool `json:"auth"`
	// Insecure lets a node listen beyond loopback without TLS and auth.
	Insecure bool `json:"insecure"`
}

// httpPortOffset places the default HTTP listener: 127.0.0.1:9400 for a
// node on port 7400, 9401 for 7401, so that the nodes of a local cluster
// do not collide.
const httpPortOffset = 2000

const usage = `raftbusd is a raftbus node: a message broker with Azure Service Bus
semantics, replicated with Raft.

Usage:
  raftbusd [flags]

Examples:
  # a single node on 127.0.0.1:7400, data in ./raftbus-data
  raftbusd

  # a new three-node cluster: start each with the same peer list
  raftbusd --node-id n1 --listen 127.0.0.1:7401 --data-dir data/n1 \
           --peers n1=127.0.0.1:7401,n2=127.0.0.1:7402,n3=127.0.0.1:7403

  # add a node to a running cluster
  raftbusd --node-id n4 --listen 127.0.0.1:7404 --data-dir data/n4 --join 127.0.0.1:7401

  # TLS: a development CA and certificates (see 'raftbusd certs -help'),
  # then every node with its own certificate
  raftbusd certs init --dir certs
  raftbusd certs node --dir certs --id n1 --host 127.0.0.1,localhost
  raftbusd --node-id n1 ... --tls-ca certs/ca.pem --tls-cert certs/n1.pem --tls-key certs/n1-key.pem

A node that listens on anything but a loopback address needs TLS and
--auth, or --insecure to run without them on a network you trust.

Flags:
`

func main() {
	grpcbuf.Install() // before any gRPC connection or server exists
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "raftbusd: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "certs" {
		return runCerts(args[1:], os.Stdout, stderr)
	}
	opts, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log, err := newLogger(stderr, opts.LogLevel, opts.LogFormat)
	if err != nil {
		return err
	}
	// A node's live heap is small unless it holds many messages; see
	// internal/gctune for why collections wait for a heap of 64 MiB.
	defer gctune.Start()()
	peers, err := parsePeers(opts.Peers)
	if err != nil {
		return err
	}
	if len(peers) > 0 && opts.Join != "" {
		return errors.New("--peers forms a new cluster and --join joins a running one: give one of them")
	}
	maxOffset, err := time.ParseDuration(opts.MaxClockOffset)
	if err != nil || maxOffset <= 0 {
		return fmt.Errorf("--max-clock-offset must be a positive duration such as 500ms, not %q", opts.MaxClockOffset)
	}
	quiesceAfter, err := time.ParseDuration(opts.QuiesceAfter)
	if err != nil || quiesceAfter < 0 {
		return fmt.Errorf("--quiesce-after must be a duration such as 30s (0: never), not %q", opts.QuiesceAfter)
	}
	if quiesceAfter == 0 {
		quiesceAfter = -1 // never
	}
	// Fault injection only: skews every wall-clock reading of the node.
	offset, err := clock.FaultOffset(os.Getenv(clock.FaultOffsetEnv))
	if err != nil {
		return err
	}
	if offset != 0 {
		log.Warn("clock offset injected for fault testing", "env", clock.FaultOffsetEnv, "offset", offset)
	}
	// The HTTP listener comes up before the node, so that probes see it
	// start: /healthz answers at once, /readyz once the node is ready.
	nodeTLS, err := loadTLS(opts)
	if err != nil {
		return err
	}
	var started atomic.Pointer[cluster.Node]
	httpSrv, err := serveHTTP(opts, &started, nodeTLS, log)
	if err != nil {
		return err
	}
	if httpSrv != nil {
		defer httpSrv.Close()
	}
	amqpLis, err := listenAMQP(opts, nodeTLS, log)
	if err != nil {
		return err
	}
	if amqpLis != nil {
		defer amqpLis.Close() // in case the node fails to start
	}
	managementLis, err := listenManagement(opts, nodeTLS, log)
	if err != nil {
		return err
	}
	if managementLis != nil {
		defer managementLis.Close() // in case the node fails to start
	}
	node, err := cluster.Start(cluster.Config{
		NodeID:            opts.NodeID,
		ListenAddr:        opts.Listen,
		AdvertiseAddr:     opts.Advertise,
		DataDir:           opts.DataDir,
		Peers:             peers,
		Join:              opts.Join,
		DefaultPartitions: uint32(opts.Partitions),
		Logger:            log,
		MaxClockOffset:    maxOffset,
		QuiesceAfter:      quiesceAfter,
		Clock:             clock.NewSystem(offset),
		TLS:               nodeTLS,
		Auth:              opts.Auth,
	})
	if err != nil {
		return err
	}
	started.Store(node)
	log.Info("raftbusd serving", "node", node.ID(), "address", node.Addr(), "data_dir", opts.DataDir)
	var amqpSrv *amqpFrontDoor
	if amqpLis != nil {
		if amqpSrv, err = serveAMQP(amqpLis, node, nodeTLS, opts.Auth, log); err != nil {
			node.Close()
			return err
		}
	}
	var managementSrv *managementFrontDoor
	if managementLis != nil {
		managementSrv = serveManagement(managementLis, node, nodeTLS, opts.Auth, log)
	}
	// AMQP connections and management requests end before the node
	// goes: they are its clients.
	closeFrontDoors := func() {
		if amqpSrv != nil {
			amqpSrv.Close()
		}
		if managementSrv != nil {
			managementSrv.Close()
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
	case err := <-node.Failed():
		closeFrontDoors()
		node.Close()
		return err
	}
	stop() // a second signal stops the process at once
	closeFrontDoors()
	log.Info("shutting down: handing over what this node leads")
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return node.Shutdown(ctx)
}

// shutdownTimeout bounds a graceful shutdown (SIGTERM, SIGINT): handing
// over the groups the node leads and finishing the requests in flight.
// What is left then is cut short.
const shutdownTimeout = 15 * time.Second

func parse(args []string, stderr io.Writer) (options, error) {
	opts := options{
		NodeID:     "n1",
		Listen:     "127.0.0.1:7400",
		DataDir:    "raftbus-data",
		Partitions: 1,
		LogLevel:   "info",
		LogFormat:  "text",

		MaxClockOffset: cluster.DefaultMaxClockOffset.String(),
		QuiesceAfter:   cluster.DefaultQuiesceAfter.String(),
	}
	fs := flag.NewFlagSet("raftbusd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	configFile := fs.String("config", "", "JSON `file` with any of the settings below, by their flag names with '_' for '-' (flags win)")
	var flagged options
	fs.StringVar(&flagged.NodeID, "node-id", opts.NodeID, "this node's `id`, fixed for the life of its data dir")
	fs.StringVar(&flagged.Listen, "listen", opts.Listen, "`host:port` to serve clients and other nodes on")
	fs.StringVar(&flagged.Advertise, "advertise", "", "`host:port` other nodes and clients reach this node at (default: the listen address)")
	fs.StringVar(&flagged.DataDir, "data-dir", opts.DataDir, "`directory` for the node's Raft logs and snapshots")
	fs.StringVar(&flagged.Peers, "peers", "", "form a new cluster of these nodes: `id=host:port,...`, this node included, the same on every node")
	fs.StringVar(&flagged.Join, "join", "", "join the running cluster that the node at `host:port` belongs to")
	fs.UintVar(&flagged.Partitions, "partitions", opts.Partitions, "partition `count` of queues created without one")
	fs.StringVar(&flagged.MaxClockOffset, "max-clock-offset", opts.MaxClockOffset, "how far this node's clock may be from a majority of the cluster's before it refuses to lead (the same on every node)")
	fs.StringVar(&flagged.QuiesceAfter, "quiesce-after", opts.QuiesceAfter, "how long a partition must serve no request before its replicas stop its Raft group until it is needed again (0: never)")
	fs.StringVar(&flagged.LogLevel, "log-level", opts.LogLevel, "debug, info, warn or error")
	fs.StringVar(&flagged.LogFormat, "log-format", opts.LogFormat, "text or json")
	var httpAddr string
	fs.StringVar(&httpAddr, "http", "", "`host:port` of the HTTP listener for the web console (/console/), /metrics, /healthz, /readyz (and /debug/pprof/ with --pprof); empty: none (default: 127.0.0.1 at the --listen port + 2000, e.g. 127.0.0.1:9400)")
	var amqpAddr string
	fs.StringVar(&amqpAddr, "amqp", "", "`host:port` of the AMQP 1.0 listener for the Azure Service Bus SDKs (TLS when the node has TLS); empty: none (default: 127.0.0.1 at the --listen port - 1728, e.g. 127.0.0.1:5672)")
	var managementAddr string
	fs.StringVar(&managementAddr, "management", "", "`host:port` of the Service Bus management REST API (ATOM over HTTPS) for the SDKs' administration clients (TLS when the node has TLS); empty: none (default: 127.0.0.1 at the --listen port - 2100, e.g. 127.0.0.1:5300)")
	fs.BoolVar(&flagged.Pprof, "pprof", false, "serve Go's profiles at /debug/pprof/ on the HTTP listener, which must be on loopback")
	fs.StringVar(&flagged.TLSCert, "tls-cert", "", "this node's certificate (PEM `file`), issued by the cluster CA for its node id")
	fs.StringVar(&flagged.TLSKey, "tls-key", "", "the private key (PEM `file`) of --tls-cert")
	fs.StringVar(&flagged.TLSCA, "tls-ca", "", "the cluster CA's certificate (PEM `file`): peers and clients must present certificates it signed")
	fs.BoolVar(&flagged.Auth, "auth", false, "every client call needs a SharedAccessSignature token of an access policy (needs TLS); the root policy's connection string is written to <data-dir>/root-access-key")
	fs.BoolVar(&flagged.Insecure, "insecure", false, "listen beyond loopback without TLS and --auth: anyone who reaches the port can do anything")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected argument %q (see -help)", fs.Arg(0))
	}
	if *configFile != "" {
		b, err := os.ReadFile(*configFile)
		if err != nil {
			return opts, fmt.Errorf("read config: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&opts); err != nil {
			return opts, fmt.Errorf("config file %s: %w", *configFile, err)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "node-id":
			opts.NodeID = flagged.NodeID
		case "listen":
			opts.Listen = flagged.Listen
		case "advertise":
			opts.Advertise = flagged.Advertise
		case "data-dir":
			opts.DataDir = flagged.DataDir
		case "peers":
			opts.Peers = flagged.Peers
		case "join":
			opts.Join = flagged.Join
		case "partitions":
			opts.Partitions = flagged.Partitions
		case "max-clock-offset":
			opts.MaxClockOffset = flagged.MaxClockOffset
		case "quiesce-after":
			opts.QuiesceAfter = flagged.QuiesceAfter
		case "log-level":
			opts.LogLevel = flagged.LogLevel
		case "log-format":
			opts.LogFormat = flagged.LogFormat
		case "http":
			opts.HTTP = &httpAddr
		case "amqp":
			opts.AMQP = &amqpAddr
		case "management":
			opts.Management = &managementAddr
		case "pprof":
			opts.Pprof = flagged.Pprof
		case "tls-cert":
			opts.TLSCert = flagged.TLSCert
		case "tls-key":
			opts.TLSKey = flagged.TLSKey
		case "tls-ca":
			opts.TLSCA = flagged.TLSCA
		case "auth":
			opts.Auth = flagged.Auth
		case "insecure":
			opts.Insecure = flagged.Insecure
		}
	})
	if opts.Partitions < 1 || opts.Partitions > cluster.MaxPartitions {
		return opts, fmt.Errorf("--partitions must be between 1 and %d, not %d", cluster.MaxPartitions, opts.Partitions)
	}
	return opts, nil
}

// parsePeers reads "id=host:port,...".
func parsePeers(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	peers := make(map[string]string)
	for _, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not id=host:port", p)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("--peers: node %q named twice", id)
		}
		peers[id] = addr
	}
	return peers, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}
