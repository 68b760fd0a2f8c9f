// Package amqp is an AMQP 1.0 protocol engine for the server side of a
// connection: the type system codec, frames, performatives, SASL
// (ANONYMOUS and PLAIN) and the connection, session and link state
// machines with session windows and link credit.
//
// It knows nothing of messaging semantics: a Handler decides what a link
// attaches to, what an incoming delivery does and what an outgoing one
// carries. Message payloads stay opaque bytes here. The package imports
// nothing of raftbus, so that the broker's semantics and the wire protocol
// can be read, tested and changed apart.
package amqp
