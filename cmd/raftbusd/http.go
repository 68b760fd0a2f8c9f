package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/cluster/httpapi"
)

// serveHTTP starts the node's HTTP listener, or none when --http is
// empty. The node is in started once cluster.Start returns; until then
// /readyz says it is starting and /metrics is empty. A listener at the
// default address that cannot listen (its port is taken) is given up with
// a warning: the node serves all the same; one asked for fails the start.
func serveHTTP(opts options, started *atomic.Pointer[cluster.Node], log *slog.Logger) (*httpapi.Server, error) {
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
	srv, err := httpapi.Serve(addr, httpapi.Config{
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
	log.Info("serving metrics and probes", "address", "http://"+srv.Addr()+"/metrics", "pprof", opts.Pprof)
	return srv, nil
}

// defaultHTTPAddr is loopback at the gRPC port plus httpPortOffset (port
// 0, any free one, when the gRPC port is 0 or the sum is no port).
func defaultHTTPAddr(listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "127.0.0.1:0"
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p+httpPortOffset > 65535 {
		return "127.0.0.1:0"
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p+httpPortOffset))
}
