package clock

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Measurement is one reading of a peer's clock against this node's.
type Measurement struct {
	// Offset is how far the peer's clock is ahead of this node's
	// (negative: behind).
	Offset time.Duration
	// Uncertainty bounds the error of Offset: half the round trip, less
	// the time the peer took to answer.
	Uncertainty time.Duration
	// At is when the answer came back, on this node's monotonic clock.
	At time.Duration
}

// Measure turns the timestamps of one ping into a Measurement: sent is
// this node's wall clock when it sent the ping, received and replied the
// peer's when it received it and answered, and roundTrip the time from
// sending to the answer on this node's monotonic clock, which ended at
// at. The answer's arrival time is taken as sent+roundTrip, so a step of
// this node's wall clock during the ping does not distort the result.
func Measure(sent, received, replied time.Time, roundTrip, at time.Duration) Measurement {
	arrived := sent.Add(roundTrip)
	offset := (received.Sub(sent) + replied.Sub(arrived)) / 2
	uncertainty := (roundTrip - replied.Sub(received)) / 2
	return Measurement{Offset: offset, Uncertainty: max(uncertainty, 0), At: at}
}

// State is what a node knows about its own clock.
type State int

const (
	// Unconfirmed: too few clocks heard from to tell, or no majority
	// either way (a two-node cluster whose clocks disagree). The node
	// stamps nothing but does not hand leadership over, as no peer is
	// known to be better placed.
	Unconfirmed State = iota
	// Healthy: a majority of the cluster's clocks, this one included, are
	// within the maximum offset of this one.
	Healthy
	// Skewed: a majority of the cluster's clocks are beyond the maximum
	// offset of this one. This node is the odd one out: it must not lead.
	Skewed
)

func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Skewed:
		return "skewed"
	}
	return "unconfirmed"
}

// PeerOffset is one peer's clock as last measured.
type PeerOffset struct {
	NodeID string
	Measurement
}

// Verdict is a judgement of this node's clock against its peers'.
type Verdict struct {
	State State
	// Clocks is the number of clocks judged by (the cluster's members,
	// this node included); Agree and Disagree count those within and
	// beyond the maximum offset of this one (Agree includes this one).
	// The rest were not heard from recently.
	Clocks, Agree, Disagree int
	// MaxOffset is the bound judged by.
	MaxOffset time.Duration
	// Far are the peers found beyond the maximum offset, by node id.
	Far []PeerOffset
}

func (v Verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clock %s: %d of %d clocks within %v of this node's", v.State, v.Agree, v.Clocks, v.MaxOffset)
	if len(v.Far) > 0 {
		var far []string
		for _, p := range v.Far {
			far = append(far, fmt.Sprintf("%s %s", describe(-p.Offset), p.NodeID))
		}
		fmt.Fprintf(&b, "; this node's clock is %s", strings.Join(far, ", "))
	}
	if unknown := v.Clocks - v.Agree - v.Disagree; unknown > 0 {
		fmt.Fprintf(&b, "; %d not heard from", unknown)
	}
	return b.String()
}

// describe says how far ahead of a peer's clock an offset puts this
// node's ("11m0s ahead of").
func describe(ahead time.Duration) string {
	if ahead < 0 {
		return fmt.Sprintf("%v behind", (-ahead).Round(time.Millisecond))
	}
	return fmt.Sprintf("%v ahead of", ahead.Round(time.Millisecond))
}

// Monitor keeps the latest measurement of each peer's clock and judges
// this node's clock by them. It is safe for concurrent use.
type Monitor struct {
	maxOffset  time.Duration
	staleAfter time.Duration

	mu    sync.Mutex
	peers map[string]Measurement
}

// NewMonitor returns a Monitor that judges clocks further apart than
// maxOffset to disagree and forgets measurements older than staleAfter.
func NewMonitor(maxOffset, staleAfter time.Duration) *Monitor {
	return &Monitor{maxOffset: maxOffset, staleAfter: staleAfter, peers: make(map[string]Measurement)}
}

// MaxOffset is the bound the Monitor judges by.
func (m *Monitor) MaxOffset() time.Duration { return m.maxOffset }

// Record keeps a new measurement of peer's clock.
func (m *Monitor) Record(peer string, meas Measurement) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peers[peer] = meas
}

// Forget drops what is known of peer's clock (it answered as another
// cluster's node, or not as the node the cluster knows).
func (m *Monitor) Forget(peer string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.peers, peer)
}

// Latest returns the measurement of peer taken within staleAfter of now
// (this node's monotonic clock), if there is one.
func (m *Monitor) Latest(peer string, now time.Duration) (Measurement, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meas, ok := m.peers[peer]
	if !ok || now-meas.At > m.staleAfter {
		return Measurement{}, false
	}
	return meas, true
}

// Agrees reports whether peer's clock was recently measured within the
// maximum offset of this node's.
func (m *Monitor) Agrees(peer string, now time.Duration) bool {
	meas, ok := m.Latest(peer, now)
	return ok && m.within(meas)
}

// within gives a measurement the benefit of its uncertainty: a slow
// network must not make a good clock look bad, and a clock minutes off
// is found out whatever the round trip.
func (m *Monitor) within(meas Measurement) bool {
	return max(meas.Offset, -meas.Offset)-meas.Uncertainty <= m.maxOffset
}

// Verdict judges this node's clock (self) among the cluster's members
// (node ids; self is counted whether listed or not) at now, this node's
// monotonic clock.
func (m *Monitor) Verdict(self string, members []string, now time.Duration) Verdict {
	v := Verdict{Clocks: 1, Agree: 1, MaxOffset: m.maxOffset}
	seen := map[string]bool{self: true}
	for _, id := range members {
		if seen[id] {
			continue
		}
		seen[id] = true
		v.Clocks++
		meas, ok := m.Latest(id, now)
		switch {
		case !ok:
		case m.within(meas):
			v.Agree++
		default:
			v.Disagree++
			v.Far = append(v.Far, PeerOffset{NodeID: id, Measurement: meas})
		}
	}
	slices.SortFunc(v.Far, func(a, b PeerOffset) int { return strings.Compare(a.NodeID, b.NodeID) })
	switch {
	case 2*v.Agree > v.Clocks:
		v.State = Healthy
	case 2*v.Disagree > v.Clocks:
		v.State = Skewed
	default:
		v.State = Unconfirmed
	}
	return v
}
