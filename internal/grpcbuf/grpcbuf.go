// Package grpcbuf sizes the buffers gRPC reads and writes messages in.
//
// gRPC takes the buffer for a whole message (to marshal a message it
// sends, or to gather one that arrived in several HTTP/2 frames) from its
// default pool, whose tiers are 256 B, 4 KiB, 16 KiB, 32 KiB and 1 MiB,
// and clears the whole buffer each time it hands one out. Every message
// between 32 KiB and 1 MiB thus costs a 1 MiB clear: a Raft entry of a
// few dozen messages, a batch of sends, a receive of a hundred messages.
// In a node's CPU profile under load that was 9 % of the time. With a
// tier at every power of two a buffer is at most twice the message.
package grpcbuf

import (
	"fmt"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Tiers from 256 B (2^8) to 16 MiB (2^24), above the largest message a
// node sends or accepts; larger buffers are allocated as needed.
const (
	minExponent = 8
	maxExponent = 24
)

// Install makes the pool gRPC's default for every client and server of
// this process, and for its protobuf codec. Call it at the start of main,
// before any connection is made or server started: gRPC reads the default
// without synchronisation.
func Install() {
	exps := make([]uint8, 0, maxExponent-minExponent+1)
	for e := uint8(minExponent); e <= maxExponent; e++ {
		exps = append(exps, e)
	}
	pool, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic(fmt.Sprintf("grpcbuf: %v", err)) // the exponents are constants
	}
	experimental.SetDefaultBufferPool(pool)
}
