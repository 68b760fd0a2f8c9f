package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/cluster/httpapi"
	"github.com/raftbus/raftbus/console"
	"github.com/raftbus/raftbus/internal/certs"
	"github.com/raftbus/raftbus/internal/sas"
)

// serveHTTP starts the node's HTTP listener, or none when --http is
// empty. The node is in started once cluster.Start returns; until then
// /readyz says it is starting and /metrics is empty. A listener at the
// default address that cannot listen (its port is taken) is given up with
// a warning: the node serves all the same; one asked for fails the start.
func serveHTTP(opts options, started *atomic.Pointer[cluster.Node], nodeTLS *certs.NodeTLS, log *slog.Logger) (*httpapi.Server, error) {
	addr, explicit := "", opts.HTTP != nil
	if explicit {
		addr = *opts.HTTP
	} else {
		addr = defaultHTTPAddr(opts.Listen)
	}
	if addr == "" {
		if opts.Pprof {
			return nil, errors.New("--pprof serves profiles on the HTTP listener: give --http a loopback address")
		}
		return nil, nil
	}
	con, err := console.Handler(console.Config{Connect: consoleClient(started, nodeTLS), Auth: opts.Auth, Log: log})
	if err != nil {
		return nil, err
	}
	srv, err := httpapi.Serve(addr, httpapi.Config{
		Console: con,
		Metrics: prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			if n := started.Load(); n != nil {
				return n.Metrics().Gather()
			}
			return nil, nil
		}),
		Ready: func() error {
			if n := started.Load(); n != nil {
				return n.Ready()
			}
			return errors.New("the node is starting")
		},
		Pprof: opts.Pprof,
	}, log)
	if err != nil {
		if !explicit && !opts.Pprof {
			log.Warn("no HTTP listener (metrics, probes): the default address is taken; set --http", "address", addr, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("--http: %w", err)
	}
	log.Info("serving metrics, probes and the console", "address", "http://"+srv.Addr()+"/metrics", "console", "http://"+srv.Addr()+"/console/", "pprof", opts.Pprof)
	return srv, nil
}

// consoleClient makes the console's clients of this node: as the node
// itself when the cluster checks no access policies, else with the
// connection string a browser session signed in with, its endpoint
// replaced by this node (tokens name a path, not a host) and without the
// node's certificate, so that every call is checked against that key.
func consoleClient(started *atomic.Pointer[cluster.Node], nodeTLS *certs.NodeTLS) func(string) (*client.Client, error) {
	return func(connectionString string) (*client.Client, error) {
		n := started.Load()
		if n == nil {
			return nil, errors.New("the node is starting")
		}
		var tlsConfig *tls.Config
		if nodeTLS != nil {
			tlsConfig = nodeTLS.Peer
		}
		if connectionString == "" {
			return client.New([]string{n.Addr()}, &client.ClientOptions{TLSConfig: tlsConfig})
		}
		cs, err := sas.ParseConnectionString(connectionString)
		if err != nil {
			return nil, err
		}
		local := "Endpoint=sb://" + n.Addr() + "/"
		if cs.Signature != "" {
			local += ";SharedAccessSignature=" + cs.Signature
		} else {
			local += ";SharedAccessKeyName=" + cs.KeyName + ";SharedAccessKey=" + cs.Key
		}
		if cs.EntityPath != "" {
			local += ";EntityPath=" + cs.EntityPath
		}
		if tlsConfig != nil {
			tlsConfig = tlsConfig.Clone()
			tlsConfig.Certificates, tlsConfig.GetClientCertificate = nil, nil
		}
		return client.NewClientFromConnectionString(local, &client.ClientOptions{TLSConfig: tlsConfig})
	}
}

// defaultHTTPAddr is loopback at the gRPC port plus httpPortOffset (port
// 0, any free one, when the gRPC port is 0 or the sum is no port).
func defaultHTTPAddr(listen string) string { return loopbackAt(listen, httpPortOffset) }
