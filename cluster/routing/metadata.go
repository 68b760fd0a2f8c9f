package routing

import (
	"context"
	"slices"

	"google.golang.org/grpc/metadata"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// nodeCallKey marks a call one node makes to another, forwarding a
// client's call or on its own behalf: the node called does not count it
// as a client's request (the node the client called does).
const nodeCallKey = "raftbus-node-call"

// NoForward marks a call to another node as one it must serve itself,
// answering NOT_LEADER for what it does not lead, and as a node's call
// (see FromNode).
func NoForward(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward, nodeCallKey, "1")
}

// FromNode reports whether the call was made by another node (see
// NoForward), not by a client.
func FromNode(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(nodeCallKey)) > 0
}

// Forwarded reports whether the caller asked not to be forwarded (or is a
// node forwarding already).
func Forwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return slices.Contains(md.Get(raftbusv1.ForwardMetadataKey), raftbusv1.NeverForward)
}

// Internal is ctx without the caller's routing request, for the calls a
// node makes on its own behalf while serving one (looking up an entity,
// waiting for new partitions): those route freely even when the caller's
// own call must not be forwarded.
func Internal(ctx context.Context) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.MD{})
}
