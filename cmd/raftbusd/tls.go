package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/raftbus/raftbus/internal/certs"
)

// loadTLS loads the node's TLS configuration, or returns nil when TLS is
// off. A node reachable from the network needs TLS and access policies
// (--auth), unless told --insecure: without TLS anyone who reaches it can
// pose as a peer, and without policies any holder of a certificate can do
// anything.
func loadTLS(opts options) (*certs.NodeTLS, error) {
	files := certs.Files{CA: opts.TLSCA, Cert: opts.TLSCert, Key: opts.TLSKey}
	if opts.Insecure && (!files.Empty() || opts.Auth) {
		return nil, errors.New("--insecure with TLS or --auth: give one or the other")
	}
	if !opts.Insecure && !loopbackOnly(opts.Listen) && (files.Empty() || !opts.Auth) {
		return nil, fmt.Errorf("--listen %s is reachable beyond this machine: give the node a certificate (--tls-ca, --tls-cert, --tls-key; 'raftbusd certs' makes them) and --auth, or --insecure to run without either on a network you trust", opts.Listen)
	}
	if files.Empty() {
		if opts.Auth {
			return nil, errors.New("--auth needs TLS (--tls-ca, --tls-cert, --tls-key): tokens must not travel in plaintext, and nodes must tell each other from clients")
		}
		return nil, nil
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
