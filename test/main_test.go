package test

import (
	"fmt"
	"os"
	"testing"

	"github.com/raftbus/raftbus/test/procs"
)

// raftbusd is the server binary the tests run, built once.
var raftbusd string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "raftbus-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	raftbusd, err = procs.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
