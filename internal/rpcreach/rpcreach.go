// Package rpcreach tells whether a failed gRPC call may have reached its
// server, so that a caller can tell a call that certainly did nothing (safe
// to send elsewhere) from one whose outcome is unknown.
//
// The signal is grpc-go's Peer call option (google.golang.org/grpc v1.85,
// stream.go): it is filled in by clientStream.finish only when the call's
// attempt holds a transport stream, that is, after the picker handed out a
// connected transport and the stream was created on it, the point from
// which the request's headers and message may be written to the wire. A
// call that failed before that (no connection could be made: refused,
// unreachable, name not resolved, the channel in TRANSIENT_FAILURE, the
// transport closing or draining when the stream was to be created) never
// got a stream, so the option stays empty. grpc-go retries transparently
// only streams the server is known not to have processed (never written,
// refused with REFUSED_STREAM, or above a GOAWAY's last stream id); when
// such a retry then fails before getting a stream of its own, the option
// still reports the first attempt's peer, so the answer errs on the side of
// "maybe". Unlike matching error messages ("connection refused", "error
// reading from server: EOF"), this does not change with the text of a
// release or the operating system.
//
// The test of this package pins that behaviour: a call to a closed port
// reports no peer, a call whose connection breaks after the request was
// sent reports one.
package rpcreach

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// Conn wraps a connection for one call (or a sequence of calls on one
// goroutine) and records whether any of them reached a server. It is not
// safe for concurrent calls: make one per call.
type Conn struct {
	grpc.ClientConnInterface
	peer peer.Peer
}

// Wrap returns a Conn over cc.
func Wrap(cc grpc.ClientConnInterface) *Conn { return &Conn{ClientConnInterface: cc} }

// Invoke calls cc.Invoke, recording the peer the call reached.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, append(opts, grpc.Peer(&c.peer))...)
}

// NewStream opens a stream on cc, recording the peer once it ends.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.ClientConnInterface.NewStream(ctx, desc, method, append(opts, grpc.Peer(&c.peer))...)
}

// MaybeSent reports whether a call made through c got as far as a stream
// on a connected transport: its request may have reached the server. When
// it is false after a failure, the request was never sent.
func (c *Conn) MaybeSent() bool { return c.peer.Addr != nil }
