// Package sas signs and reads SharedAccessSignature tokens in the format
// of Azure Service Bus, and parses Service Bus connection strings.
//
// A token is
//
//	SharedAccessSignature sr=<resource>&sig=<signature>&se=<expiry>&skn=<key name>
//
// where resource is the URL-encoded URI of what the token is for (the
// namespace, sb://host/, or an entity, sb://host/path), expiry the Unix
// time in seconds at which it stops working, and signature the base64
// HMAC-SHA256, keyed with the key's text, of the URL-encoded resource, a
// newline and the expiry, itself URL-encoded.
package sas

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Prefix starts every token.
const Prefix = "SharedAccessSignature "

// MetadataKey is the gRPC metadata key a token travels under.
const MetadataKey = "authorization"

// Token is a parsed token.
type Token struct {
	// Resource is the URI the token is for, decoded.
	Resource string
	// KeyName names the policy whose key signed it.
	KeyName string
	// Expiry is when it stops working.
	Expiry time.Time

	signature []byte
	signed    string // the text the signature is over
}

// Sign makes a token for resource, valid until expiry, signed with key
// (the policy's key text) under keyName.
func Sign(resource, keyName, key string, expiry time.Time) string {
	encoded := url.QueryEscape(resource)
	se := strconv.FormatInt(expiry.Unix(), 10)
	sig := mac(key, encoded+"\n"+se)
	return Prefix + "sr=" + encoded + "&sig=" + url.QueryEscape(base64.StdEncoding.EncodeToString(sig)) +
		"&se=" + se + "&skn=" + url.QueryEscape(keyName)
}

func mac(key, text string) []byte {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(text))
	return h.Sum(nil)
}

// Parse reads a token. It checks the form only: Verify checks the
// signature.
func Parse(token string) (*Token, error) {
	rest, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return nil, errors.New("not a SharedAccessSignature token")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(rest, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("malformed token field %q", kv)
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("token field %s given twice", k)
		}
		fields[k] = v
	}
	for _, k := range []string{"sr", "sig", "se", "skn"} {
		if fields[k] == "" {
			return nil, fmt.Errorf("the token has no %s", k)
		}
	}
	resource, err := url.QueryUnescape(fields["sr"])
	if err != nil {
		return nil, fmt.Errorf("token resource: %w", err)
	}
	keyName, err := url.QueryUnescape(fields["skn"])
	if err != nil {
		return nil, fmt.Errorf("token key name: %w", err)
	}
	sigText, err := url.QueryUnescape(fields["sig"])
	if err != nil {
		return nil, fmt.Errorf("token signature: %w", err)
	}
	sig, err := base64.StdEncoding.DecodeString(sigText)
	if err != nil {
		return nil, fmt.Errorf("token signature: %w", err)
	}
	se, err := strconv.ParseInt(fields["se"], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("token expiry: %w", err)
	}
	return &Token{
		Resource: resource, KeyName: keyName, Expiry: time.Unix(se, 0),
		signature: sig, signed: fields["sr"] + "\n" + fields["se"],
	}, nil
}

// Verify reports whether the token was signed with key.
func (t *Token) Verify(key string) bool {
	return hmac.Equal(t.signature, mac(key, t.signed))
}

// ResourcePath is the path of the token's resource URI without its
// leading and trailing slashes: "" for the namespace, else an entity path.
// The host is not compared: a cluster is reached at many addresses. A
// query is no part of the path: the Go SDK's administration client signs
// each request's URL, api-version and all.
func (t *Token) ResourcePath() (string, error) {
	// Not url.Parse: raftbus endpoints may list several hosts.
	_, rest, ok := strings.Cut(t.Resource, "://")
	if !ok {
		return "", fmt.Errorf("token resource %q is not a URI such as sb://host/path", t.Resource)
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, _, _ = strings.Cut(rest, "?")
	_, path, _ := strings.Cut(rest, "/")
	return strings.Trim(path, "/"), nil
}

// NewKey returns a new random key: 32 bytes, base64, as Service Bus makes
// them.
func NewKey() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return base64.StdEncoding.EncodeToString(b)
}

// ConnectionString is a parsed Service Bus connection string:
// Endpoint=sb://host:port/;SharedAccessKeyName=...;SharedAccessKey=...
// or Endpoint=...;SharedAccessSignature=....
type ConnectionString struct {
	// Endpoint is the URI of the namespace (sb://host:port/; raftbus also
	// takes several nodes, sb://host:port,host:port/).
	Endpoint string
	// Addresses are the endpoint's host:port (port 7400 when it has
	// none), one per node named.
	Addresses []string
	KeyName   string
	Key       string
	Signature string
	// EntityPath, when set, restricts the client to one entity.
	EntityPath string
}

// ParseConnectionString parses s.
func ParseConnectionString(s string) (*ConnectionString, error) {
	cs := &ConnectionString{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("connection string: %q is not key=value", part)
		}
		switch strings.ToLower(k) {
		case "endpoint":
			cs.Endpoint = v
		case "sharedaccesskeyname":
			cs.KeyName = v
		case "sharedaccesskey":
			cs.Key = v
		case "sharedaccesssignature":
			cs.Signature = v
		case "entitypath":
			cs.EntityPath = v
		}
	}
	if cs.Endpoint == "" {
		return nil, errors.New("connection string: no Endpoint")
	}
	// Not url.Parse: a list of hosts is no URL host.
	rest, ok := strings.CutPrefix(cs.Endpoint, "sb://")
	hosts, _, _ := strings.Cut(rest, "/")
	if !ok || hosts == "" {
		return nil, fmt.Errorf("connection string: Endpoint %q is not sb://host:port/", cs.Endpoint)
	}
	for _, h := range strings.Split(hosts, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "7400")
		}
		cs.Addresses = append(cs.Addresses, h)
	}
	switch {
	case cs.Signature != "" && (cs.KeyName != "" || cs.Key != ""):
		return nil, errors.New("connection string: give SharedAccessSignature or SharedAccessKeyName and SharedAccessKey, not both")
	case cs.Signature == "" && (cs.KeyName == "" || cs.Key == ""):
		return nil, errors.New("connection string: SharedAccessKeyName and SharedAccessKey are both needed")
	}
	return cs, nil
}

// String is the connection string of an endpoint and a key.
func String(endpoint, keyName, key string) string {
	return "Endpoint=" + endpoint + ";SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key
}
