package procs

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestARaceInANodeFailsTheTest(t *testing.T) {
	dir := t.TempDir()
	clean, racy := filepath.Join(dir, "n1.log"), filepath.Join(dir, "n2.log")
	os.WriteFile(clean, []byte("level=INFO msg=\"raftbusd serving\"\n"), 0o600)
	os.WriteFile(racy, []byte("level=INFO msg=started\n==================\nWARNING: DATA RACE\nWrite at 0x00c000 by goroutine 7:\n"), 0o600)
	rec := &recorder{TB: t}
	c := &Cluster{t: rec, Nodes: []*Node{{ID: "n1", LogPath: clean}, {ID: "n2", LogPath: racy}}}
	c.killAll()
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "n2 had a data race") || !strings.Contains(rec.errs[0], "goroutine 7") {
		t.Fatalf("errors %q, want n2's race", rec.errs)
	}
}

// TestStartTriesOtherPortsWhenOneIsTaken takes the port start chose for
// n2's cluster address before n2 binds it, as another test's process can:
// n2 fails to start, and start must start the cluster over on other ports.
func TestStartTriesOtherPortsWhenOneIsTaken(t *testing.T) {
	bin, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var held net.Listener
	beforeStart = func(c *Cluster) {
		if held == nil {
			if held, err = net.Listen("tcp", c.Nodes[1].Addr); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer func() {
		beforeStart = nil
		held.Close()
	}()
	c := Start(t, bin, 3)
	if c.Nodes[1].Addr == held.Addr().String() {
		t.Fatalf("n2 is on %s, the port taken before it started", c.Nodes[1].Addr)
	}
	for i := range c.Nodes {
		if !c.Running(i) {
			t.Fatalf("%s is not running", c.Nodes[i].ID)
		}
	}
}
