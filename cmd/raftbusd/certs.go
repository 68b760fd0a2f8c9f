package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/raftbus/raftbus/internal/certs"
)

const certsUsage = `raftbusd certs writes a development certificate authority and the
certificates of a cluster's nodes and clients (ECDSA P-256, PEM), so that
TLS needs no other tool. Keys are readable by their owner only.

Usage:
  raftbusd certs init   --dir DIR                       a new cluster CA: ca.pem, ca-key.pem
  raftbusd certs node   --dir DIR --id ID --host H,...  a node certificate: ID.pem, ID-key.pem
  raftbusd certs client --dir DIR --name NAME           a client certificate: NAME.pem, NAME-key.pem

A node certificate names the node id (raftbus://node/ID) and the host names
and addresses the node is reached at; a client certificate names the client
(raftbus://client/NAME). Only node certificates open the internal services.

Example, a three-node cluster on this machine:
  raftbusd certs init --dir certs
  for n in n1 n2 n3; do raftbusd certs node --dir certs --id $n --host 127.0.0.1,localhost; done
  raftbusd certs client --dir certs --name app

Flags:
`

// runCerts runs 'raftbusd certs <init|node|client>'.
func runCerts(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("raftbusd certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, certsUsage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", "certs", "`directory` of the CA and the certificates")
	id := fs.String("id", "", "node: the node `id` (its --node-id)")
	hosts := fs.String("host", "", "node: the host names and IP `addresses` it is reached at, comma-separated")
	name := fs.String("name", "", "client: the client's `name`")
	if len(args) == 0 {
		fs.Usage()
		return errors.New("certs: want init, node or client")
	}
	what := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("certs: unexpected argument %q", fs.Arg(0))
	}
	switch what {
	case "init":
		if err := certs.Init(*dir); err != nil {
			return fmt.Errorf("certs init: %w", err)
		}
		fmt.Fprintf(stdout, "wrote the cluster CA: %s (share it) and %s (keep it secret)\n",
			filepath.Join(*dir, certs.CAFile), filepath.Join(*dir, certs.CAKeyFile))
		return nil
	case "node":
		if *id == "" {
			return errors.New("certs node: --id is required")
		}
		var hs []string
		for _, h := range strings.Split(*hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hs = append(hs, h)
			}
		}
		if err := certs.Issue(*dir, certs.Node, *id, hs); err != nil {
			return fmt.Errorf("certs node: %w", err)
		}
		return wrote(stdout, *dir, *id)
	case "client":
		if *name == "" {
			return errors.New("certs client: --name is required")
		}
		if err := certs.Issue(*dir, certs.Client, *name, nil); err != nil {
			return fmt.Errorf("certs client: %w", err)
		}
		return wrote(stdout, *dir, *name)
	}
	fs.Usage()
	return fmt.Errorf("certs: want init, node or client, not %q", what)
}

func wrote(w io.Writer, dir, name string) error {
	_, err := fmt.Fprintf(w, "wrote %s and %s\n", filepath.Join(dir, certs.CertFile(name)), filepath.Join(dir, certs.KeyFile(name)))
	return err
}
