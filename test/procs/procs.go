// Package procs runs raftbusd clusters as real processes for tests: each
// node its own process with its own data dir and log file, on loopback.
// Every process a Cluster starts is stopped by PID when the test ends,
// whether it passed or not.
package procs

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/netns"
)

// Build compiles raftbusd into dir and returns the binary's path. Test
// packages call it once, from TestMain.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "raftbusd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/raftbus/raftbus/cmd/raftbusd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build raftbusd: %v\n%s", err, out)
	}
	return bin, nil
}

// RunTests is the TestMain of a package that starts raftbusd: it builds
// the binary into a temporary directory, sets *bin to it, runs the tests
// and removes the directory, returning the exit code.
func RunTests(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "raftbusd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Node is one raftbusd process (or the place of one that is not running).
type Node struct {
	ID      string
	Addr    string
	DataDir string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// PID is the running process's id, 0 when it is not running.
func (n *Node) PID() int {
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Cluster is a set of raftbusd processes formed from one peer list.
type Cluster struct {
	t     testing.TB
	bin   string
	hosts []*netns.Host
	Nodes []*Node
}

// Start starts n nodes on free loopback ports, forming a new cluster, and
// waits until every one answers.
func Start(t testing.TB, bin string, n int) *Cluster {
	return start(t, bin, n, nil)
}

// StartOn starts one node in each of hosts, on port 7400 of the host's
// address, so that the network between them can be cut.
func StartOn(t testing.TB, bin string, hosts []*netns.Host) *Cluster {
	return start(t, bin, len(hosts), hosts)
}

func start(t testing.TB, bin string, n int, hosts []*netns.Host) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: bin, hosts: hosts}
	t.Cleanup(c.killAll)
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		addr := ""
		if hosts != nil {
			addr = hosts[i].Addr + ":7400"
		} else {
			addr = freeAddr(t)
		}
		c.Nodes = append(c.Nodes, &Node{
			ID:      fmt.Sprintf("n%d", i+1),
			Addr:    addr,
			DataDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			LogPath: filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)),
		})
	}
	for i := range c.Nodes {
		c.Restart(i)
	}
	for i := range c.Nodes {
		c.WaitReady(i, 30*time.Second)
	}
	return c
}

// freeAddr finds a loopback port nothing listens on. Another process could
// take it before the node does; then the node fails to start and says so.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (c *Cluster) peers() string {
	var ps []string
	for _, n := range c.Nodes {
		ps = append(ps, n.ID+"="+n.Addr)
	}
	return strings.Join(ps, ",")
}

// Restart starts node i's process (again), on its address and data dir.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	n := c.Nodes[i]
	if n.cmd != nil {
		c.t.Fatalf("restart %s: still running as pid %d", n.ID, n.PID())
	}
	log, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	args := []string{"--node-id", n.ID, "--listen", n.Addr, "--data-dir", n.DataDir, "--peers", c.peers(), "--log-level", "info"}
	cmd := exec.Command(c.bin, args...)
	if c.hosts != nil {
		cmd = c.hosts[i].Command(c.bin, args...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", n.ID, err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func(exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(n.exited)
}

// Running reports whether node i's process is running.
func (c *Cluster) Running(i int) bool { return c.Nodes[i].cmd != nil }

// Kill sends SIGKILL to node i and waits for it to die.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	n := c.Nodes[i]
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies as well
	n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// Stop sends SIGTERM to node i and waits for it to exit, as a graceful
// shutdown does; after timeout it kills it.
func (c *Cluster) Stop(i int, timeout time.Duration) {
	c.t.Helper()
	n := c.Nodes[i]
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT)
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(timeout):
		c.t.Logf("%s did not stop within %v of SIGTERM; killing it", n.ID, timeout)
		n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd = nil
}

// Pause stops node i with SIGSTOP: alive to the kernel, silent to the
// cluster. Resume continues it.
func (c *Cluster) Pause(i int) { c.signal(i, syscall.SIGSTOP) }

// Resume sends SIGCONT to node i.
func (c *Cluster) Resume(i int) { c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	if n := c.Nodes[i]; n.cmd != nil {
		if err := n.cmd.Process.Signal(sig); err != nil {
			c.t.Fatalf("signal %s: %v", n.ID, err)
		}
	}
}

func (c *Cluster) killAll() {
	for i, n := range c.Nodes {
		if n.cmd != nil {
			c.Kill(i)
		}
	}
	if c.t.Failed() {
		for _, n := range c.Nodes {
			if b, err := os.ReadFile(n.LogPath); err == nil {
				c.t.Logf("--- log of %s (last 4 KiB) ---\n%s", n.ID, tail(b, 4096))
			}
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// WaitReady waits until node i answers GetClusterInfo.
func (c *Cluster) WaitReady(i int, timeout time.Duration) {
	c.t.Helper()
	admin := raftbusv1.NewAdminServiceClient(c.Conn(i))
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		select {
		case <-c.Nodes[i].exited:
			b, _ := os.ReadFile(c.Nodes[i].LogPath)
			c.t.Fatalf("%s exited during start-up:\n%s", c.Nodes[i].ID, tail(b, 4096))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not ready after %v: %v", c.Nodes[i].ID, timeout, err)
		}
		time.Sleep(min(50*time.Millisecond<<min(attempt, 4), time.Second))
	}
}

// Conn is a client connection to node i, closed when the test ends.
func (c *Cluster) Conn(i int) *grpc.ClientConn {
	c.t.Helper()
	conn, err := grpc.NewClient(c.Nodes[i].Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// IndexOf maps an address to its node's index, -1 when none has it.
func (c *Cluster) IndexOf(addr string) int {
	for i, n := range c.Nodes {
		if n.Addr == addr {
			return i
		}
	}
	return -1
}
