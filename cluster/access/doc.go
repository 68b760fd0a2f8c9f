// Package access decides who may call what on a node's gRPC port, before
// any service sees the call.
//
// With TLS on, every caller is known by the certificate it presented
// (verified against the cluster CA by the TLS handshake; see
// internal/certs): the internal services (the Raft transport and the node
// service) answer only nodes, and a node that also says who it is in the
// call's metadata must say the name its certificate was issued for; the
// public API answers any holder of a certificate of the cluster CA, node
// or client. The gRPC health service answers anyone, so that probes need
// no certificate. A refused call gets UNAUTHORIZED, changes nothing and is
// logged. With TLS off, everything is let through: the node runs on a
// loopback address or was started with --insecure.
package access
