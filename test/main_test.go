package test

import (
	"os"
	"testing"

	"github.com/raftbus/raftbus/test/procs"
)

// raftbusd is the server binary the tests run, built once.
var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }
