package grpcbuf

import (
	"testing"

	"google.golang.org/grpc/mem"
)

// A message of 70 KiB (an entry of a few dozen 1 KiB messages) gets a
// buffer of 128 KiB, not gRPC's default 1 MiB, and the sizes of the
// messages a broker moves each get a buffer at most twice their size.
func TestBuffersAreAtMostTwiceTheMessage(t *testing.T) {
	Install()
	pool := mem.DefaultBufferPool()
	for _, n := range []int{300, 5 << 10, 33 << 10, 70 << 10, 600 << 10, 3 << 20} {
		b := pool.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d) gave %d bytes", n, len(*b))
		}
		if c := cap(*b); c > 2*n {
			t.Errorf("Get(%d) gave a buffer of %d bytes, more than twice the message", n, c)
		}
		pool.Put(b)
	}
}
