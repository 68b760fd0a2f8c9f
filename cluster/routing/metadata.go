package routing

import (
	"context"
	"slices"

	"google.golang.org/grpc/metadata"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// NoForward marks a call to another node as one it must serve itself,
// answering NOT_LEADER for what it does not lead.
func NoForward(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, raftbusv1.ForwardMetadataKey, raftbusv1.NeverForward)
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
