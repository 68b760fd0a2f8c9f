// Package service implements raftbus's public gRPC services,
// raftbus.v1.AdminService (queues, topics, subscriptions, rules, the
// routing table) and raftbus.v1.MessagingService (send, schedule,
// receive, peek, deferred messages, sessions, settlement), and the
// interceptor that gives every failure they return its status and
// ErrorInfo.
//
// It is named for what it serves: the API's services, as gRPC calls
// them. A service turns a request into engine commands for the right
// partitions and their results into the answer; it owns no state. What
// it needs of the node it runs on is the Node interface: the node's
// metadata (entities read with read-your-writes, changes made at the
// metadata leader) and its partitions (a call routed to a partition's
// leader or served on the local replica, the replicas this node holds
// for a receive across partitions). cluster.Node gives it; the tests here
// give fakes. A front door of another protocol (AMQP, HTTP) calls these
// services' methods in process, so that an operation means one thing
// whichever door it comes through.
//
// It must not import package cluster, nor reach the Raft groups but
// through Node.
package service
