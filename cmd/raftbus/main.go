// Command raftbus is the command-line client of a raftbus cluster: entity
// administration, send, receive, peek, scheduling and cluster status.
//
// It is built on the Go SDK (client, client/admin) and speaks only the
// public API. Commands are dispatched by hand over the standard flag
// package: the command set is small and flat, and a framework would add a
// dependency without removing much code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/raftbus/raftbus/internal/grpcbuf"
)

func main() {
	grpcbuf.Install() // before any gRPC connection exists
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
