package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// The files Init and Issue write into a directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// CertFile and KeyFile are the names of name's certificate and key.
func CertFile(name string) string { return name + ".pem" }
func KeyFile(name string) string  { return name + "-key.pem" }

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 2 * 365 * 24 * time.Hour
)

// validName is what a node id or client name may be: it goes into a file
// name and a URI.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Init writes a new cluster CA (certificate and key) into dir. It refuses
// to replace an existing CA: every certificate of the cluster hangs on it.
func Init(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err == nil {
		return fmt.Errorf("%s already holds a CA (%s); remove it first to start over", dir, CAKeyFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "raftbus cluster CA", Organization: []string{"raftbus"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create CA certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writePair(dir, CAFile, CAKeyFile, der, key)
}

// Issue writes a certificate of kind k for name, signed by the CA in dir,
// and its key, into dir. A node certificate is valid for serving at hosts
// (DNS names or IP addresses) and for calling peers; a client certificate
// only for calling.
func Issue(dir string, k Kind, name string, hosts []string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%q is not a valid %s name (letters, digits, '.', '_', '-'; at most 63)", name, k)
	}
	if k != Node && k != Client {
		return fmt.Errorf("cannot issue a certificate of kind %s", k)
	}
	if k == Node && len(hosts) == 0 {
		return errors.New("a node certificate needs the host names or addresses the node is reached at")
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"raftbus " + k.String()}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*neturl.URL{IdentityURI(k, name)},
	}
	if k == Node {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create certificate for %s %s: %w", k, name, err)
	}
	return writePair(dir, CertFile(name), KeyFile(name), der, key)
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s holds no CA: create one first (raftbusd certs init)", dir)
	}
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("the CA's key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", CAFile, CAKeyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", CAFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", CAKeyFile, err)
	}
	return cert, key, nil
}

// writePair writes a certificate (readable by all) and its key (by the
// owner only), refusing to overwrite either.
func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists already; remove it to issue it again", path)
		}
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
