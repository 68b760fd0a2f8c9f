package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/raftbus/raftbus/internal/certs"
)

// loadTLS loads the node's TLS configuration, or returns nil when TLS is
// off, which only a node on loopback or one told --insecure may be: a
// node reachable from the network without TLS lets anyone who reaches it
// read and change everything, and lets any process pose as a peer.
func loadTLS(opts options) (*certs.NodeTLS, error) {
	files := certs.Files{CA: opts.TLSCA, Cert: opts.TLSCert, Key: opts.TLSKey}
	if files.Empty() {
		if !opts.Insecure && !loopbackOnly(opts.Listen) {
			return nil, fmt.Errorf("--listen %s is reachable beyond this machine: give the node a certificate (--tls-ca, --tls-cert, --tls-key; 'raftbusd certs' makes them), or --insecure to run without TLS on a network you trust", opts.Listen)
		}
		return nil, nil
	}
	if opts.Insecure {
		return nil, errors.New("--insecure and TLS: give one of them")
	}
	t, err := certs.LoadNode(files)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return t, nil
}

// loopbackOnly reports whether a listen address accepts connections from
// this machine only.
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
