// Package certs issues and loads the certificates of a raftbus cluster,
// and tells from a verified certificate who holds it.
//
// One certificate authority (the cluster CA) signs every certificate of a
// cluster: node certificates, which a node serves its port with and
// presents to its peers, and client certificates. Who a certificate
// belongs to is written in it as a URI name: raftbus://node/<id> for a
// node, raftbus://client/<name> for a client. Only a node certificate
// opens the internal services (Raft transport, node service).
//
// Issue writes a development CA and certificates with Go's crypto/x509,
// so that TLS needs no OpenSSL; operators with their own PKI issue
// certificates with the same URI names instead.
package certs
