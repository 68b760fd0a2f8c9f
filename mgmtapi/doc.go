// Package mgmtapi serves the Service Bus management REST API, ATOM/XML
// over HTTPS, as the SDKs' administration clients call it
// (ServiceBusAdministrationClient in .NET, Java, Python and JavaScript;
// admin.Client in Go's azservicebus): queues, topics, subscriptions and
// rules created, read, updated, listed and deleted as Atom entries and
// feeds whose content is a QueueDescription, TopicDescription,
// SubscriptionDescription or RuleDescription, with the entities' runtime
// counts inside, and the namespace's NamespaceInfo.
//
// It owns the mapping between those descriptions and the gRPC API's
// entity model (raftbus.v1.QueueProperties and friends, model.go) and
// nothing else: every operation is a call of the admin service, made as
// the node itself through its in-process connection, so that it means
// what the same call means over gRPC, is served by the metadata leader
// from any node, and is validated there. What this package checks is
// what only it sees: the request's SharedAccessSignature token (against
// the node's access policies, Manage on what the path names), the body
// (size, no DOCTYPE, well-formed XML, values of the right types) and the
// names in the path.
//
// It must not import package cluster, nor keep state of its own.
package mgmtapi
