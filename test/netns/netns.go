// Package netns builds a private network of test hosts on one Linux
// machine, so that failover tests can cut real network links between real
// processes instead of faking faults inside the broker.
//
// Each host is a network namespace with one interface on a bridge that
// lives in a namespace of its own (the switch), where no firewall of the
// machine applies. The test process stays in the machine's namespace and
// reaches every host through one more link into the switch. A partition is
// made with iptables rules inside the hosts' namespaces, so it cuts exactly
// the host-to-host links named and nothing else.
//
// It needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), and the ip and iptables
// commands (Debian packages iproute2 and iptables).
package netns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Network is a set of hosts on one private subnet.
type Network struct {
	id     string // short unique tag used in every name
	subnet string // e.g. "10.213.7", hosts are .1 .. .N, the test process .254
	hosts  []*Host
	sw     string // the switch namespace
	// shaped are the hosts whose link Slow shaped, for Heal.
	shaped map[*Host]bool
}

// Host is one namespace of the network.
type Host struct {
	Name string // the namespace name
	// Addr is the host's IPv4 address on the network.
	Addr string
	net  *Network
}

// Available reports why hosts cannot be made here, or nil when they can.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netns: needs root")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s not found (install iproute2 and iptables)", tool)
		}
	}
	return nil
}

// New creates n hosts on subnet 10.213.<third>.0/24. Callers that build
// networks in parallel pass distinct tags and thirds. Close removes
// everything New made; on failure New removes what it made itself.
func New(tag string, third int, n int) (nw *Network, err error) {
	if n < 1 || n > 250 || third < 0 || third > 255 || len(tag) > 6 {
		return nil, fmt.Errorf("netns: bad network %q/%d with %d hosts", tag, third, n)
	}
	nw = &Network{id: tag, subnet: fmt.Sprintf("10.213.%d", third), sw: "rb" + tag + "sw", shaped: make(map[*Host]bool)}
	defer func() {
		if err != nil {
			nw.Close()
			nw = nil
		}
	}()
	br := "rb" + tag + "br"
	up := "rb" + tag + "up"
	steps := [][]string{
		{"ip", "netns", "add", nw.sw},
		{"ip", "-n", nw.sw, "link", "add", br, "type", "bridge"},
		{"ip", "-n", nw.sw, "link", "set", br, "up"},
		{"ip", "-n", nw.sw, "link", "set", "lo", "up"},
		// The test process's own link into the switch.
		{"ip", "link", "add", up, "type", "veth", "peer", "name", up + "p", "netns", nw.sw},
		{"ip", "-n", nw.sw, "link", "set", up + "p", "master", br, "up"},
		{"ip", "addr", "add", nw.subnet + ".254/24", "dev", up},
		{"ip", "link", "set", up, "up"},
	}
	if err := run(steps...); err != nil {
		return nw, err
	}
	for i := 1; i <= n; i++ {
		h := &Host{Name: fmt.Sprintf("rb%sh%d", tag, i), Addr: fmt.Sprintf("%s.%d", nw.subnet, i), net: nw}
		veth := fmt.Sprintf("rb%sv%d", tag, i)
		err := run(
			[]string{"ip", "netns", "add", h.Name},
			[]string{"ip", "-n", h.Name, "link", "set", "lo", "up"},
			[]string{"ip", "-n", nw.sw, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.Name},
			[]string{"ip", "-n", nw.sw, "link", "set", veth, "master", br, "up"},
			[]string{"ip", "-n", h.Name, "addr", "add", h.Addr + "/24", "dev", "eth0"},
			[]string{"ip", "-n", h.Name, "link", "set", "eth0", "up"},
		)
		nw.hosts = append(nw.hosts, h)
		if err != nil {
			return nw, err
		}
	}
	return nw, nil
}

// Hosts are the network's hosts, in order.
func (nw *Network) Hosts() []*Host { return nw.hosts }

// Command returns a command that runs name with args inside the host's
// namespace. The process started is name itself (ip netns exec replaces
// itself with it), so its PID is the one to signal.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Isolate cuts h off from every other host (the test process can still
// reach it: it is the client, and a client usually can).
func (nw *Network) Isolate(h *Host) error {
	var others []*Host
	for _, o := range nw.hosts {
		if o != h {
			others = append(others, o)
		}
	}
	return nw.Cut([]*Host{h}, others)
}

// Cut drops all traffic between every host of a and every host of b, in
// both directions, leaving links within each side alone.
func (nw *Network) Cut(a, b []*Host) error {
	var steps [][]string
	for _, x := range a {
		for _, y := range b {
			steps = append(steps, drop(x, y), drop(y, x))
		}
	}
	return run(steps...)
}

func drop(in, from *Host) []string {
	return []string{"ip", "netns", "exec", in.Name, "iptables", "-w", "-A", "INPUT", "-s", from.Addr, "-j", "DROP"}
}

// Heal removes every cut, loss and shaping.
func (nw *Network) Heal() error {
	var steps [][]string
	for _, h := range nw.hosts {
		steps = append(steps, []string{"ip", "netns", "exec", h.Name, "iptables", "-w", "-F", "INPUT"})
		if nw.shaped[h] {
			steps = append(steps, []string{"tc", "-n", h.Name, "qdisc", "del", "dev", "eth0", "root"})
			delete(nw.shaped, h)
		}
	}
	return run(steps...)
}

// Close deletes the hosts, the switch and the links. Processes still
// running inside a host keep its namespace alive until they exit; callers
// stop them first.
func (nw *Network) Close() error {
	var errs []string
	for _, h := range nw.hosts {
		if err := run([]string{"ip", "netns", "del", h.Name}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// Deleting the switch namespace removes the bridge and every veth pair
	// with an end in it, the test process's link included.
	if err := run([]string{"ip", "netns", "del", nw.sw}); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("netns: close: %s", strings.Join(errs, "; "))
	}
	return nil
}

func run(steps ...[]string) error {
	for _, s := range steps {
		var out bytes.Buffer
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("netns: %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(out.String()))
		}
	}
	return nil
}
