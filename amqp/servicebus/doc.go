// Package servicebus serves Azure Service Bus semantics over the AMQP 1.0
// engine in package amqp, so that the official Service Bus SDKs work
// against raftbus: the $cbs token exchange, sender links to queues and
// topics, receiver links to queues, subscriptions and their dead-letter
// sub-queues in peek-lock and receive-and-delete modes, and the
// $management request/response node.
//
// Every operation goes through a raftbus client SDK that reaches the node
// itself in process (no socket) and the other nodes over the network: it
// routes each call to the partition leader, retries, and coalesces
// concurrent calls. This package has no messaging semantics of its own;
// it translates. With a TokenChecker it also checks the clients' access
// tokens, since the node's own client passes every check.
package servicebus
