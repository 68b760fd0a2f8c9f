package netns

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the programs run inside the hosts: an echo
// server and a one-shot client, chosen by environment variable.
func TestMain(m *testing.M) {
	switch os.Getenv("NETNS_TEST_ROLE") {
	case "echo":
		ln, err := net.Listen("tcp", os.Getenv("NETNS_TEST_ADDR"))
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(2)
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(0)
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprint(c, line)
			}()
		}
	case "dial":
		if err := echo(os.Getenv("NETNS_TEST_ADDR")); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echo sends a line to an echo server and checks it comes back. The
// timeout is what tells a cut link from a slow one.
func echo(addr string) error { return echoSized(addr, 4, 2*time.Second) }

// echoSized echoes a line of size bytes within timeout.
func echoSized(addr string, size int, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	want := strings.Repeat("p", size) + "\n"
	if _, err := fmt.Fprint(c, want); err != nil {
		return err
	}
	line, err := bufio.NewReaderSize(c, size+1).ReadString('\n')
	if err != nil {
		return err
	}
	if line != want {
		return fmt.Errorf("echo: got %d bytes back, want %d", len(line), len(want))
	}
	return nil
}

// serve starts an echo server in h on port 7400 and returns its address.
func serve(t *testing.T, h *Host) string {
	t.Helper()
	addr := h.Addr + ":7400"
	server := h.Command(os.Args[0])
	server.Env = append(os.Environ(), "NETNS_TEST_ROLE=echo", "NETNS_TEST_ADDR="+addr)
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Process.Kill()
		server.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "listening" {
		t.Fatalf("echo server in %s: %q", h.Name, line)
	}
	return addr
}

// dialFrom echoes through addr from inside h.
func dialFrom(h *Host, addr string) error {
	c := h.Command(os.Args[0])
	c.Env = append(os.Environ(), "NETNS_TEST_ROLE=dial", "NETNS_TEST_ADDR="+addr)
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, b)
	}
	return nil
}

// network makes n hosts for one test and removes them after it.
func network(t *testing.T, n int) *Network {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	nw, err := New(fmt.Sprintf("t%d%d", os.Getpid()%1000, n), 200+(os.Getpid()+n)%50, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	return nw
}

func TestIsolateCutsHostsButNotTheTestProcess(t *testing.T) {
	nw := network(t, 2)
	h1, h2 := nw.Hosts()[0], nw.Hosts()[1]
	addr := serve(t, h1)
	if err := dialFrom(h2, addr); err != nil {
		t.Fatalf("host 2 cannot reach host 1 before any cut: %v", err)
	}
	if err := echo(addr); err != nil {
		t.Fatalf("test process cannot reach host 1: %v", err)
	}

	if err := nw.Isolate(h1); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(h2, addr); err == nil {
		t.Fatal("host 2 reached host 1 across the cut")
	}
	if err := echo(addr); err != nil {
		t.Fatalf("isolating host 1 cut the test process off too: %v", err)
	}

	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(h2, addr); err != nil {
		t.Fatalf("host 2 cannot reach host 1 after healing: %v", err)
	}
}

// reachable is which hosts host from can reach, as a string of host
// numbers ("1 2 4").
func reachable(t *testing.T, nw *Network, addrs []string, from int) string {
	t.Helper()
	var got []string
	for i, addr := range addrs {
		if i != from && dialFrom(nw.Hosts()[from], addr) == nil {
			got = append(got, fmt.Sprint(i+1))
		}
	}
	return strings.Join(got, " ")
}

func TestBridgeRingLossAndSlowLinks(t *testing.T) {
	nw := network(t, 5)
	var addrs []string
	for _, h := range nw.Hosts() {
		addrs = append(addrs, serve(t, h))
	}
	check := func(what string, from int, want string) {
		t.Helper()
		if got := reachable(t, nw, addrs, from); got != want {
			t.Errorf("%s: host %d reaches %q, want %q", what, from+1, got, want)
		}
	}
	heal := func() {
		t.Helper()
		if err := nw.Heal(); err != nil {
			t.Fatal(err)
		}
		check("healed", 0, "2 3 4 5")
	}

	// Host 3 bridges {1, 2} and {4, 5}.
	if err := nw.Bridge(nw.Hosts()[2]); err != nil {
		t.Fatal(err)
	}
	check("bridge", 0, "2 3")
	check("bridge", 2, "1 2 4 5")
	check("bridge", 4, "3 4")
	heal()

	// Each host reaches its two neighbours on the ring 2-3-4-5-1.
	if err := nw.Ring(1); err != nil {
		t.Fatal(err)
	}
	check("ring", 0, "2 5")
	check("ring", 2, "2 4")
	heal()

	// Every packet to host 1 from another host is lost; the test
	// process still gets through.
	if err := nw.Lossy(nw.Hosts()[:1], 1); err != nil {
		t.Fatal(err)
	}
	check("loss", 1, "3 4 5")
	if err := echo(addrs[0]); err != nil {
		t.Errorf("loss on host 1 hit the test process: %v", err)
	}
	heal()

	// 64 KiB back from host 1 at 256 kbit/s takes 2 s.
	if err := nw.Slow(nw.Hosts()[0], "256kbit", "5s"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := echoSized(addrs[0], 64<<10, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("64 KiB through a 256 kbit/s link in %v", d)
	}
	heal()
	start = time.Now()
	if err := echoSized(addrs[0], 64<<10, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("64 KiB took %v after healing: still shaped?", d)
	}
}
