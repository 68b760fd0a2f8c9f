package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Kind is what a certificate's holder is.
type Kind int

const (
	// Unknown is a certificate without a raftbus identity.
	Unknown Kind = iota
	// Node is a cluster node.
	Node
	// Client is a client: an application, the CLI, an operator.
	Client
)

func (k Kind) String() string {
	switch k {
	case Node:
		return "node"
	case Client:
		return "client"
	}
	return "unknown"
}

// uriScheme is the scheme of the URI names that say who holds a
// certificate.
const uriScheme = "raftbus"

// IdentityURI is the URI name of the holder of a certificate of kind k
// named name.
func IdentityURI(k Kind, name string) *url.URL {
	return &url.URL{Scheme: uriScheme, Host: k.String(), Path: "/" + name}
}

// Identity is who holds a certificate, by its URI name.
type Identity struct {
	Kind Kind
	Name string
}

func (id Identity) String() string {
	if id.Kind == Unknown {
		return "a certificate without a raftbus identity"
	}
	return id.Kind.String() + " " + id.Name
}

// IdentityOf reads who holds cert. A certificate with several raftbus
// names, or none, is Unknown.
func IdentityOf(cert *x509.Certificate) Identity {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		name := strings.TrimPrefix(u.Path, "/")
		if name == "" || strings.Contains(name, "/") {
			continue
		}
		switch u.Host {
		case Node.String():
			found = append(found, Identity{Node, name})
		case Client.String():
			found = append(found, Identity{Client, name})
		}
	}
	if len(found) != 1 {
		return Identity{}
	}
	return found[0]
}

// Files are where a node's or client's TLS material is.
type Files struct {
	// CA is the cluster CA's certificate (PEM): what peers' and clients'
	// certificates are verified against.
	CA string
	// Cert and Key are this holder's certificate and private key (PEM).
	Cert, Key string
}

// Empty reports whether no file is set: TLS is off.
func (f Files) Empty() bool { return f.CA == "" && f.Cert == "" && f.Key == "" }

func (f Files) load() (*x509.CertPool, *tls.Certificate, error) {
	var pool *x509.CertPool
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("read CA certificate: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s holds no PEM certificate", f.CA)
		}
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, nil, errors.New("a certificate needs its key and a key its certificate")
	}
	if f.Cert == "" {
		return pool, nil, nil
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("load certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	return pool, &pair, nil
}

// NodeTLS is a node's TLS configuration: how it serves its port and how
// it calls its peers.
type NodeTLS struct {
	// Server serves the gRPC port: it presents the node certificate and
	// verifies the client certificates given against the cluster CA
	// (which caller may call what is decided per call, see
	// cluster/access).
	Server *tls.Config
	// Peer calls other nodes: it presents the node certificate and
	// accepts only servers whose certificate the cluster CA signed for a
	// node.
	Peer *tls.Config
	// ID is the node id the certificate was issued for.
	ID string
}

// LoadNode loads a node's TLS configuration from f, all three files
// required, and checks that the certificate is a node certificate of the
// cluster CA.
func LoadNode(f Files) (*NodeTLS, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, errors.New("TLS needs the cluster CA certificate, the node certificate and its key")
	}
	pool, pair, err := f.load()
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", f.Cert, err)
	}
	id := IdentityOf(leaf)
	if id.Kind != Node {
		return nil, fmt.Errorf("%s is not a node certificate (it names %s; want a URI name %s)", f.Cert, id, IdentityURI(Node, "<node id>"))
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%s is not signed by the cluster CA %s: %w", f.Cert, f.CA, err)
	}
	server := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
	}
	peer := &tls.Config{
		MinVersion:       tls.VersionTLS12,
		Certificates:     []tls.Certificate{*pair},
		RootCAs:          pool,
		VerifyConnection: requireNode,
	}
	return &NodeTLS{Server: server, Peer: peer, ID: id.Name}, nil
}

// requireNode refuses a peer whose (verified) certificate is not a node's:
// a client certificate of the same CA must not pass for a node.
func requireNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate")
	}
	if id := IdentityOf(cs.PeerCertificates[0]); id.Kind != Node {
		return fmt.Errorf("the peer's certificate names %s, not a node", id)
	}
	return nil
}

// LoadClient loads a client's TLS configuration from f: the CA to verify
// the nodes with (the system's roots when empty) and, when given, the
// client certificate to present.
func LoadClient(f Files) (*tls.Config, error) {
	pool, pair, err := f.load()
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if pair != nil {
		c.Certificates = []tls.Certificate{*pair}
	}
	return c, nil
}
