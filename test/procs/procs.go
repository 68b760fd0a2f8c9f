// Package procs runs raftbusd clusters as real processes for tests: each
// node its own process with its own data dir and log file, on loopback.
// Every process a Cluster starts is stopped by PID when the test ends,
// whether it passed or not.
package procs

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/internal/certs"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
	"github.com/raftbus/raftbus/test/netns"
)

// Build compiles raftbusd into dir and returns the binary's path, with the
// race detector when the calling tests have it. Test packages call it
// once, from TestMain.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "raftbusd")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/raftbus/raftbus/cmd/raftbusd")...)
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
	ID   string
	Addr string
	// HTTPAddr is the node's HTTP listener (metrics, probes, console), on
	// loopback; empty for nodes in network namespaces.
	HTTPAddr string
	// AMQPAddr is the node's AMQP 1.0 listener, on loopback; empty for
	// nodes in network namespaces.
	AMQPAddr string
	// ManagementAddr is the node's listener of the Service Bus
	// management REST API, on loopback; empty for nodes in network
	// namespaces.
	ManagementAddr string
	DataDir        string
	LogPath        string
	// Env is added to the environment of the node's process from its next
	// (re)start, e.g. "RAFTBUS_FAULT_CLOCK_OFFSET=11m" to skew its clock;
	// set it to nil to heal.
	Env    []string
	cmd    *exec.Cmd
	exited chan struct{}
	// disk is the file system the data dir is on (Options.Disks).
	disk *disk
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
	// Dir holds every node's data dir and log. When the test fails it is
	// kept (see keepFailed); files a test puts in it are kept with it.
	Dir string
	// CertDir, set when the cluster runs with TLS, holds its CA and the
	// certificates of its nodes and of the test's client ("test").
	CertDir string
	auth    bool
	// replaced counts the nodes Replace put in place of others, for the
	// ids of the next.
	replaced int
}

// Options change how a cluster is started.
type Options struct {
	// TLS runs every node with a certificate of a CA made for the
	// cluster (mutual TLS between nodes, client certificates required).
	TLS bool
	// Auth, with TLS, makes every client call need a token of an access
	// policy (--auth); Conn then signs with the root policy's key.
	Auth bool
	// AMQPAddr, when set, is the first node's AMQP listener instead of a
	// free port: 127.0.0.1:5671 for an SDK that connects to the default
	// AMQPS port only (Python's azure-servicebus on uamqp).
	AMQPAddr string
	// Disks puts each node's data dir on a file system of its own, an
	// ext4 image on a loop device, so that one node's disk can fail
	// (Cluster.FailDisk). It needs what DisksSupported checks.
	Disks bool
}

// testClient names the client certificate Conn presents.
const testClient = "test"

// Start starts n nodes on free loopback ports, forming a new cluster, and
// waits until every one answers.
func Start(t testing.TB, bin string, n int) *Cluster {
	return start(t, bin, n, nil, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, bin string, n int, opts Options) *Cluster {
	return start(t, bin, n, nil, opts)
}

// StartOn starts one node in each of hosts, on port 7400 of the host's
// address, so that the network between them can be cut.
func StartOn(t testing.TB, bin string, hosts []*netns.Host) *Cluster {
	return start(t, bin, len(hosts), hosts, Options{})
}

// StartOnWith is StartOn with options.
func StartOnWith(t testing.TB, bin string, hosts []*netns.Host, opts Options) *Cluster {
	return start(t, bin, len(hosts), hosts, opts)
}

func start(t testing.TB, bin string, n int, hosts []*netns.Host, opts Options) *Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &Cluster{t: t, bin: bin, hosts: hosts, Dir: dir}
	// Cleanups run last first: the processes must be gone before their
	// directory is removed, or they write into it while it goes.
	t.Cleanup(func() {
		c.killAll()
		c.unmountDisks()
		c.keepFailed()
	})
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		node := &Node{ID: id, DataDir: filepath.Join(dir, id), LogPath: filepath.Join(dir, id+".log")}
		if opts.Disks {
			d, err := newDisk(filepath.Join(dir, "disks"), id)
			if err != nil {
				t.Fatalf("a disk for %s: %v", id, err)
			}
			node.disk, node.DataDir = d, filepath.Join(d.dir, id)
		}
		c.Nodes = append(c.Nodes, node)
	}
	c.auth = opts.Auth
	for attempt := 1; ; attempt++ {
		for i, n := range c.Nodes {
			if hosts != nil {
				n.Addr = hosts[i].Addr + ":7400"
			} else {
				n.Addr, n.HTTPAddr, n.AMQPAddr, n.ManagementAddr = freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
				if i == 0 && opts.AMQPAddr != "" {
					n.AMQPAddr = opts.AMQPAddr
				}
			}
		}
		if opts.TLS && attempt == 1 {
			c.issueCerts() // for the nodes' hosts, which stay
		}
		if beforeStart != nil {
			beforeStart(c)
		}
		for i := range c.Nodes {
			c.Restart(i)
		}
		// A port found free can be taken by another test's process before
		// the node binds it: the suite's packages run at once. The cluster
		// is new, so it starts over on other ports.
		if hosts != nil || attempt == startAttempts || !c.lostAPort() {
			break
		}
		c.killAll()
		for _, n := range c.Nodes {
			os.RemoveAll(n.DataDir)
			os.Remove(n.LogPath)
		}
	}
	for i := range c.Nodes {
		c.WaitReady(i, 30*time.Second)
	}
	return c
}

// startAttempts is how many sets of ports start tries.
const startAttempts = 3

// beforeStart, when set, runs as start has chosen the nodes' addresses,
// before it starts them (tests of this package take a port with it).
var beforeStart func(*Cluster)

// lostAPort waits until every node answers or one has exited, and reports
// whether one exited because an address of its was in use.
func (c *Cluster) lostAPort() bool {
	admins := make([]raftbusv1.AdminServiceClient, len(c.Nodes))
	for i := range c.Nodes {
		admins[i] = raftbusv1.NewAdminServiceClient(c.Conn(i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		up := 0
		for i, n := range c.Nodes {
			select {
			case <-n.exited:
				b, _ := os.ReadFile(n.LogPath)
				return bytes.Contains(b, []byte("address already in use"))
			default:
			}
			if answer(admins[i]) == nil {
				up++
			}
		}
		if up == len(c.Nodes) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// issueCerts makes the cluster's CA, a certificate for each node (for the
// host of its address) and the test client's.
func (c *Cluster) issueCerts() {
	c.t.Helper()
	c.CertDir = filepath.Join(c.Dir, "certs")
	if err := certs.Init(c.CertDir); err != nil {
		c.t.Fatal(err)
	}
	for _, n := range c.Nodes {
		host, _, _ := net.SplitHostPort(n.Addr)
		hosts := []string{host}
		if host == "127.0.0.1" {
			// Clients that check a name but not an IP address against
			// the certificate (qpid-proton) connect to localhost.
			hosts = append(hosts, "localhost")
		}
		if err := certs.Issue(c.CertDir, certs.Node, n.ID, hosts); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := certs.Issue(c.CertDir, certs.Client, testClient, nil); err != nil {
		c.t.Fatal(err)
	}
}

// CertFiles are the CA and the certificate files of name in the
// cluster's certificate directory.
func (c *Cluster) CertFiles(name string) certs.Files {
	return certs.Files{
		CA:   filepath.Join(c.CertDir, certs.CAFile),
		Cert: filepath.Join(c.CertDir, certs.CertFile(name)),
		Key:  filepath.Join(c.CertDir, certs.KeyFile(name)),
	}
}

// NodeTLS is the TLS configuration of a client presenting node n1's
// certificate, for tests that call the internal node service; nil when
// the cluster runs without TLS.
func (c *Cluster) NodeTLS() *tls.Config {
	c.t.Helper()
	if c.CertDir == "" {
		return nil
	}
	cfg, err := certs.LoadClient(c.CertFiles(c.Nodes[0].ID))
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// ClientTLS is the TLS configuration of a client presenting the test
// client's certificate; nil when the cluster runs without TLS.
func (c *Cluster) ClientTLS() *tls.Config {
	c.t.Helper()
	if c.CertDir == "" {
		return nil
	}
	cfg, err := certs.LoadClient(c.CertFiles(testClient))
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// freeAddr finds a loopback port nothing listens on, for a node to listen
// on a moment later. It looks below the kernel's ephemeral range
// (ip_local_port_range), where port 0 would land: the outgoing
// connections of every process on the machine (the suite's packages run
// at once) take their ports from that range, and one of them took a port
// handed out there before its node bound it. It never hands out a port
// twice in one test process (closed after the check, a port is free for
// the next check too). Another test process could still take the same
// port; then the node fails to start, and start tries other ports.
func freeAddr(t testing.TB) string {
	handedOut.Lock()
	defer handedOut.Unlock()
	if low := ephemeralLow(); low > 10000 {
		for range 100 {
			port := 10000 + rand.IntN(low-10000)
			if handedOut.ports[port] {
				continue
			}
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				l.Close()
				handedOut.ports[port] = true
				return l.Addr().String()
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	handedOut.ports[l.Addr().(*net.TCPAddr).Port] = true
	return l.Addr().String()
}

// handedOut are the ports freeAddr has handed out in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	low, _ := strconv.Atoi(fields[0])
	return low
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
	if n.HTTPAddr != "" {
		args = append(args, "--http", n.HTTPAddr)
	}
	if n.AMQPAddr != "" {
		args = append(args, "--amqp", n.AMQPAddr)
	}
	if n.ManagementAddr != "" {
		args = append(args, "--management", n.ManagementAddr)
	}
	if c.CertDir != "" {
		f := c.CertFiles(n.ID)
		args = append(args, "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key)
		if c.auth {
			args = append(args, "--auth")
		}
	} else if c.hosts != nil {
		args = append(args, "--insecure") // the hosts' addresses are not loopback
	}
	cmd := exec.Command(c.bin, args...)
	if c.hosts != nil {
		cmd = c.hosts[i].Command(c.bin, args...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if len(n.Env) > 0 {
		cmd.Env = append(os.Environ(), n.Env...)
	}
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

// Replace puts a new node in place i, where the process must have been
// stopped: under the next unused id, with an empty data dir, on the same
// address. Its peer list names the cluster's nodes, which have formed the
// cluster, so it joins it as a new member (as a machine that replaces a
// dead one does). It returns the new id; removing the old one from the
// cluster is the caller's part.
func (c *Cluster) Replace(i int) string {
	c.t.Helper()
	n := c.Nodes[i]
	if n.cmd != nil {
		c.t.Fatalf("replace %s: still running as pid %d", n.ID, n.PID())
	}
	c.replaced++
	id := fmt.Sprintf("n%d", len(c.Nodes)+c.replaced)
	n.ID, n.Env = id, nil
	n.DataDir = filepath.Join(c.Dir, id)
	if n.disk != nil {
		n.DataDir = filepath.Join(n.disk.dir, id)
	}
	n.LogPath = filepath.Join(c.Dir, id+".log")
	if c.CertDir != "" {
		host, _, _ := net.SplitHostPort(n.Addr)
		if err := certs.Issue(c.CertDir, certs.Node, id, []string{host}); err != nil {
			c.t.Fatal(err)
		}
	}
	c.Restart(i)
	return id
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

// Terminate sends SIGTERM to node i, as an operator stopping it would, and
// waits up to timeout for it to exit. A node still running then is killed
// and the error says so: a graceful stop must end.
func (c *Cluster) Terminate(i int, timeout time.Duration) error {
	c.t.Helper()
	n := c.Nodes[i]
	if n.cmd == nil {
		return nil
	}
	n.cmd.Process.Signal(syscall.SIGCONT) // a paused process could not stop
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM %s: %w", n.ID, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-n.exited:
		n.cmd = nil
		return nil
	case <-timer.C:
	}
	c.Kill(i)
	return fmt.Errorf("%s still running %v after SIGTERM; killed", n.ID, timeout)
}

// WaitExit waits up to timeout for node i's process to exit on its own
// and reports whether it did. A node that exited can be restarted.
func (c *Cluster) WaitExit(i int, timeout time.Duration) bool {
	c.t.Helper()
	n := c.Nodes[i]
	if n.cmd == nil {
		return true
	}
	select {
	case <-n.exited:
		n.cmd = nil
		return true
	case <-time.After(timeout):
		return false
	}
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

// keepFailed moves the cluster's directory (data dirs, node logs, and
// whatever the test put there, such as a history) out of the test's way
// when the test failed, so that a failure can be looked into after the
// run: under $TMPDIR/raftbus-failed/<test>-<time>.
func (c *Cluster) keepFailed() {
	if !c.t.Failed() {
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(c.t.Name())
	dst := filepath.Join(os.TempDir(), "raftbus-failed", fmt.Sprintf("%s-%s", name, time.Now().Format("20060102-150405")))
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		c.t.Logf("keep the failed cluster's files: %v", err)
		return
	}
	if err := os.Rename(c.Dir, dst); err != nil {
		c.t.Logf("keep the failed cluster's files: %v", err)
		return
	}
	c.t.Logf("the failed cluster's data dirs, node logs and history are kept in %s", dst)
}

func (c *Cluster) killAll() {
	for i, n := range c.Nodes {
		if n.cmd != nil {
			c.Kill(i)
		}
	}
	for _, n := range c.Nodes {
		if b, err := os.ReadFile(n.LogPath); err == nil {
			if i := bytes.Index(b, []byte(raceReport)); i >= 0 {
				c.t.Errorf("%s had a data race:\n%s", n.ID, b[i:min(len(b), i+8192)])
			}
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

// Logged reports whether any node's log holds text.
func (c *Cluster) Logged(text string) bool {
	for _, n := range c.Nodes {
		if b, err := os.ReadFile(n.LogPath); err == nil && bytes.Contains(b, []byte(text)) {
			return true
		}
	}
	return false
}

// raceReport starts what the race detector writes on a race.
const raceReport = "WARNING: DATA RACE"

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
		err := answer(admin)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not ready after %v: %v", c.Nodes[i].ID, timeout, err)
		}
		time.Sleep(min(50*time.Millisecond<<min(attempt, 4), time.Second))
	}
}

// answer asks the node behind admin what a client asks first, which a
// node answers once it is ready.
func answer(admin raftbusv1.AdminServiceClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := admin.GetClusterInfo(ctx, &raftbusv1.GetClusterInfoRequest{})
	return err
}

// Conn is a client connection to node i, closed when the test ends.
func (c *Cluster) Conn(i int) *grpc.ClientConn {
	c.t.Helper()
	creds := insecure.NewCredentials()
	if cfg := c.ClientTLS(); cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.auth {
		opts = append(opts, grpc.WithPerRPCCredentials(rootToken{c}))
	}
	conn, err := grpc.NewClient(c.Nodes[i].Addr, opts...)
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

// RootConnectionString is the connection string of the cluster's root
// policy, as the nodes write it into their data dirs, with every node's
// address as the endpoint; "" until a node has written it.
func (c *Cluster) RootConnectionString() string {
	for _, n := range c.Nodes {
		b, err := os.ReadFile(filepath.Join(n.DataDir, cluster.RootKeyFile))
		if err != nil {
			continue
		}
		cs, err := sas.ParseConnectionString(strings.TrimSpace(string(b)))
		if err != nil {
			c.t.Fatalf("%s: %v", cluster.RootKeyFile, err)
		}
		return sas.String("sb://"+strings.Join(c.Addrs(), ",")+"/", cs.KeyName, cs.Key)
	}
	return ""
}

// rootToken signs every call with the root policy's key, read from the
// nodes' data dirs (grpc.PerRPCCredentials).
type rootToken struct{ c *Cluster }

func (r rootToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	s := r.c.RootConnectionString()
	if s == "" {
		return nil, fmt.Errorf("no node has written %s yet", cluster.RootKeyFile)
	}
	cs, err := sas.ParseConnectionString(s)
	if err != nil {
		return nil, err
	}
	return map[string]string{sas.MetadataKey: sas.Sign(cs.Endpoint, cs.KeyName, cs.Key, time.Now().Add(time.Hour))}, nil
}

func (rootToken) RequireTransportSecurity() bool { return true }
