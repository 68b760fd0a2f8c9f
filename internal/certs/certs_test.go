package certs

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func issued(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, CertFile(name)))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func files(dir, name string) Files {
	return Files{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, CertFile(name)), Key: filepath.Join(dir, KeyFile(name))}
}

func TestIssuedCertificatesNameTheirHolder(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	if err := Issue(dir, Node, "n1", []string{"127.0.0.1", "node1.example"}); err != nil {
		t.Fatal(err)
	}
	if err := Issue(dir, Client, "app", nil); err != nil {
		t.Fatal(err)
	}
	n1 := issued(t, dir, "n1")
	if id := IdentityOf(n1); id != (Identity{Node, "n1"}) {
		t.Fatalf("node certificate names %v", id)
	}
	if len(n1.IPAddresses) != 1 || !n1.IPAddresses[0].IsLoopback() || len(n1.DNSNames) != 1 || n1.DNSNames[0] != "node1.example" {
		t.Fatalf("node certificate hosts %v %v", n1.IPAddresses, n1.DNSNames)
	}
	if id := IdentityOf(issued(t, dir, "app")); id != (Identity{Client, "app"}) {
		t.Fatalf("client certificate names %v", id)
	}
	for _, name := range []string{CAKeyFile, KeyFile("n1"), KeyFile("app")} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want readable by its owner only", name, err, st.Mode())
		}
	}
	nt, err := LoadNode(files(dir, "n1"))
	if err != nil || nt.ID != "n1" {
		t.Fatalf("load node: %v, %+v", err, nt)
	}
}

func TestRefusals(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if err := Init(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := Issue(dir, Client, "app", nil); err != nil {
		t.Fatal(err)
	}
	if err := Issue(other, Node, "n1", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	foreign := files(other, "n1")
	foreign.CA = filepath.Join(dir, CAFile)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"a second CA over the first", Init(dir), "already holds a CA"},
		{"a certificate issued twice", Issue(dir, Client, "app", nil), "exists already"},
		{"a node without hosts", Issue(dir, Node, "n2", nil), "host names"},
		{"a name that is no file name", Issue(dir, Client, "../x", nil), "not a valid"},
		{"no CA", Issue(t.TempDir(), Client, "app", nil), "holds no CA"},
		{"a client certificate as a node's", loadNodeErr(files(dir, "app")), "not a node certificate"},
		{"a node certificate of another CA", loadNodeErr(foreign), "not signed by the cluster CA"},
		{"a certificate without its key", loadNodeErr(Files{CA: foreign.CA, Cert: foreign.Cert}), "TLS needs"},
	}
	for _, tc := range cases {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, tc.err, tc.want)
		}
	}
}

func loadNodeErr(f Files) error {
	_, err := LoadNode(f)
	return err
}
