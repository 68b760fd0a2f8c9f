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
func echo(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintln(c, "ping")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo: got %q", line)
	}
	return nil
}

func TestIsolateCutsHostsButNotTheTestProcess(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	nw, err := New(fmt.Sprintf("t%d", os.Getpid()%10000), 200+os.Getpid()%50, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	h1, h2 := nw.Hosts()[0], nw.Hosts()[1]
	addr := h1.Addr + ":7400"

	server := h1.Command(os.Args[0])
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
		t.Fatalf("echo server in %s: %q", h1.Name, line)
	}

	dialFrom := func(h *Host) error {
		c := h.Command(os.Args[0])
		c.Env = append(os.Environ(), "NETNS_TEST_ROLE=dial", "NETNS_TEST_ADDR="+addr)
		if b, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, b)
		}
		return nil
	}
	if err := dialFrom(h2); err != nil {
		t.Fatalf("host 2 cannot reach host 1 before any cut: %v", err)
	}
	if err := echo(addr); err != nil {
		t.Fatalf("test process cannot reach host 1: %v", err)
	}

	if err := nw.Isolate(h1); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(h2); err == nil {
		t.Fatal("host 2 reached host 1 across the cut")
	}
	if err := echo(addr); err != nil {
		t.Fatalf("isolating host 1 cut the test process off too: %v", err)
	}

	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(h2); err != nil {
		t.Fatalf("host 2 cannot reach host 1 after healing: %v", err)
	}
}
