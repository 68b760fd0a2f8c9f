// Command raftbus is the command-line client: entity administration, send,
// receive, peek, cluster status and benchmarks.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "raftbus: the command-line client is not built yet")
	os.Exit(1)
}
