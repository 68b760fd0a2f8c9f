package client

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"time"

	"github.com/raftbus/raftbus/internal/sas"
)

const (
	// tokenLifetime is how long a token the client signs is valid;
	// tokenRenewal how long before its end a new one is signed.
	tokenLifetime = time.Hour
	tokenRenewal  = 5 * time.Minute
)

// NewClientFromConnectionString connects to a cluster with a Service Bus
// connection string, as azservicebus does:
//
//	Endpoint=sb://host:port/;SharedAccessKeyName=<policy>;SharedAccessKey=<key>
//
// (or with SharedAccessSignature=<token> in place of the key name and
// key). The client signs a SharedAccessSignature token for the endpoint
// (or its EntityPath) with the key, renews it before it expires, and sends
// it with every call. The endpoint's host:port is the node to connect to
// first (port 7400 when it has none); name several, comma-separated
// (sb://n1:7400,n2:7400/), so that any of them can answer while one is
// down.
// Tokens never travel in plaintext: without options.TLSConfig the client
// uses TLS with the system's roots.
func NewClientFromConnectionString(connectionString string, options *ClientOptions) (*Client, error) {
	cs, err := sas.ParseConnectionString(connectionString)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: err.Error()}
	}
	var opts ClientOptions
	if options != nil {
		opts = *options
	}
	if opts.TLSConfig == nil {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	resource := cs.Endpoint
	if cs.EntityPath != "" {
		resource = strings.TrimSuffix(resource, "/") + "/" + cs.EntityPath
	}
	opts.credential = &sasCredential{resource: resource, keyName: cs.KeyName, key: cs.Key, fixed: cs.Signature}
	return New(cs.Addresses, &opts)
}

// sasCredential puts a SharedAccessSignature token on every call
// (grpc.PerRPCCredentials).
type sasCredential struct {
	resource, keyName, key string
	// fixed is a token given as it is, never renewed.
	fixed string

	mu      sync.Mutex
	token   string
	expires time.Time
}

func (s *sasCredential) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if s.fixed != "" {
		return map[string]string{sas.MetadataKey: s.fixed}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); s.expires.Sub(now) < tokenRenewal {
		s.expires = now.Add(tokenLifetime)
		s.token = sas.Sign(s.resource, s.keyName, s.key, s.expires)
	}
	return map[string]string{sas.MetadataKey: s.token}, nil
}

// RequireTransportSecurity keeps tokens off plaintext connections.
func (s *sasCredential) RequireTransportSecurity() bool { return true }
