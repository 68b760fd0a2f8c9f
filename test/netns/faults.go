package netns

import (
	"fmt"
	"strconv"
)

// The partitions of Jepsen's nemeses that are not a clean cut in two, and
// links that lose or delay packets. Heal undoes all of them.
//
// The kernel here has no netem, so delay is made by shaping: Slow puts a
// token bucket (tbf) on a host's link, which queues what exceeds its rate
// for up to a latency and drops the rest. That is the delay of a
// congested link, growing with the traffic, not a fixed added delay.

// others are the hosts of nw other than h.
func (nw *Network) others(h *Host) []*Host {
	var out []*Host
	for _, o := range nw.hosts {
		if o != h {
			out = append(out, o)
		}
	}
	return out
}

// Bridge splits the hosts other than bridge into two halves that cannot
// reach each other, while bridge reaches both: every host but bridge sees
// only its half and bridge, so no two of them agree on who is reachable.
func (nw *Network) Bridge(bridge *Host) error {
	rest := nw.others(bridge)
	if len(rest) < 2 {
		return fmt.Errorf("netns: a bridge needs at least 3 hosts, have %d", len(nw.hosts))
	}
	half := len(rest) / 2
	return nw.Cut(rest[:half], rest[half:])
}

// Ring lays the hosts on a ring, starting at first, and lets each reach
// only its nearest neighbours: as many as make a majority with itself.
// Every host then sees a majority, and each a different one. It needs at
// least 5 hosts (with fewer, a majority is everyone or a clean cut).
func (nw *Network) Ring(first int) error {
	n := len(nw.hosts)
	if n < 5 {
		return fmt.Errorf("netns: a majorities ring needs at least 5 hosts, have %d", n)
	}
	reach := (n/2 + 1) / 2 // neighbours on each side
	var steps [][]string
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			d := j - i
			if n-d < d {
				d = n - d
			}
			if d > reach {
				a, b := nw.hosts[(first+i)%n], nw.hosts[(first+j)%n]
				steps = append(steps, drop(a, b), drop(b, a))
			}
		}
	}
	return run(steps...)
}

// Lossy drops each packet between a host of hosts and any other host with
// probability p, in each direction it arrives at a host of hosts. The test
// process's own traffic is spared.
func (nw *Network) Lossy(hosts []*Host, p float64) error {
	if p <= 0 || p > 1 {
		return fmt.Errorf("netns: loss probability %v is not in (0, 1]", p)
	}
	prob := strconv.FormatFloat(p, 'f', 4, 64)
	var steps [][]string
	for _, h := range hosts {
		for _, o := range nw.others(h) {
			steps = append(steps, []string{"ip", "netns", "exec", h.Name, "iptables", "-w", "-A", "INPUT", "-s", o.Addr,
				"-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"})
		}
	}
	return run(steps...)
}

// Slow limits what h sends to rate (a tc rate, e.g. "512kbit"), queueing
// the excess for up to latency (e.g. "400ms") and dropping what does not
// fit: a congested link. It applies to everything h sends, its answers to
// the test process included.
func (nw *Network) Slow(h *Host, rate, latency string) error {
	if err := run([]string{"tc", "-n", h.Name, "qdisc", "replace", "dev", "eth0", "root", "tbf",
		"rate", rate, "burst", "16kb", "latency", latency}); err != nil {
		return err
	}
	nw.shaped[h] = true
	return nil
}
