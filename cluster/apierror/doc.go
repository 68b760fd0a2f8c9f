// Package apierror is a failure on its way to a client: an Error with a
// stable reason, a message, whether a retry can succeed and, for
// NOT_LEADER, where the leader is; the classification of what the layers
// below fail with (engine, partition, a forwarded call's status, a
// context); and the one encoding of it that clients see, a gRPC status
// with an ErrorInfo.
//
// The node, its routing and its public services all speak it, so it sits
// below them and imports nothing of cluster. It must not grow behaviour:
// what a reason means to a client is proto/raftbus/v1 (ErrorReason).
package apierror
