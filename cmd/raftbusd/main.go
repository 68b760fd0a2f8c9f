// Command raftbusd is the raftbus server: one node of a cluster.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "raftbusd: the server is not built yet")
	os.Exit(1)
}
