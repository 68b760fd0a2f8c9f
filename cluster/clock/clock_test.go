package clock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// manual is a Source a test moves by hand: its wall clock can step, its
// monotonic clock only moves forward.
type manual struct {
	wall time.Time
	mono time.Duration
}

func (m *manual) Now() time.Time           { return m.wall }
func (m *manual) Monotonic() time.Duration { return m.mono }

// advance moves both clocks on by d, as time passing does.
func (m *manual) advance(d time.Duration) {
	m.wall = m.wall.Add(d)
	m.mono += d
}

var epoch = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestBoundedGivesNoTimeUntilPeersVouch(t *testing.T) {
	src := &manual{wall: epoch}
	b := NewBounded(src)
	if _, err := b.Now(); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("Now before any vouch: %v, want ErrUntrusted", err)
	}
	b.Vouch(src.Now(), src.Monotonic())
	if got, err := b.Now(); err != nil || !got.Equal(epoch) {
		t.Fatalf("Now after vouch = %v, %v; want %v", got, err, epoch)
	}
	b.Distrust("skewed")
	if _, err := b.Now(); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "skewed") {
		t.Fatalf("Now after distrust: %v, want ErrUntrusted saying why", err)
	}
}

// TestBoundedStampsFollowTheMonotonicClockWhenTheWallClockJumps is the
// stamp bound: a wall clock stepped 11 minutes forward after peers last
// vouched for it moves the time a leader stamps by what the monotonic
// clock saw, not by 11 minutes.
func TestBoundedStampsFollowTheMonotonicClockWhenTheWallClockJumps(t *testing.T) {
	src := &manual{wall: epoch}
	b := NewBounded(src)
	b.Vouch(src.Now(), src.Monotonic())

	src.advance(300 * time.Millisecond)
	if got, _ := b.Now(); !got.Equal(epoch.Add(300 * time.Millisecond)) {
		t.Fatalf("with a steady clock Now = %v, want the wall clock %v", got, epoch.Add(300*time.Millisecond))
	}

	src.wall = src.wall.Add(11 * time.Minute) // stepped forward
	src.advance(time.Second)
	got, err := b.Now()
	if err != nil {
		t.Fatal(err)
	}
	if want := epoch.Add(1300 * time.Millisecond); !got.Equal(want) {
		t.Fatalf("after an 11m step Now = %v, want %v (vouched time + monotonic elapsed)", got, want)
	}

	// A wall clock behind the bound is taken as it is; the partition keeps
	// its stamps from going back.
	src.wall = epoch.Add(-time.Minute)
	if got, _ := b.Now(); !got.Equal(src.wall) {
		t.Fatalf("with the wall clock behind, Now = %v, want the wall clock %v", got, src.wall)
	}
}

func TestMeasureFindsThePeerOffsetAndItsUncertainty(t *testing.T) {
	// The peer is 11m ahead; the ping takes 10ms each way and the peer
	// 2ms to answer.
	sent := epoch
	received := epoch.Add(11*time.Minute + 10*time.Millisecond)
	replied := received.Add(2 * time.Millisecond)
	m := Measure(sent, received, replied, 22*time.Millisecond, time.Hour)
	if m.Offset != 11*time.Minute || m.Uncertainty != 10*time.Millisecond || m.At != time.Hour {
		t.Fatalf("got %+v, want offset 11m, uncertainty 10ms", m)
	}
	// Asymmetric delays shift the estimate by at most the uncertainty.
	received = epoch.Add(20 * time.Millisecond)
	m = Measure(sent, received, received, 22*time.Millisecond, 0)
	if m.Offset != 9*time.Millisecond || m.Uncertainty != 11*time.Millisecond {
		t.Fatalf("got %+v, want offset 9ms ± 11ms", m)
	}
}

func TestVerdictFindsTheOddClockOut(t *testing.T) {
	const maxOffset = 500 * time.Millisecond
	now := 10 * time.Second
	fresh := func(offset time.Duration) Measurement { return Measurement{Offset: offset, At: now - time.Second} }
	cases := []struct {
		name    string
		members []string
		peers   map[string]Measurement
		want    State
		far     string
	}{
		{"alone", []string{"n1"}, nil, Healthy, ""},
		{"three agree", []string{"n1", "n2", "n3"},
			map[string]Measurement{"n2": fresh(100 * time.Millisecond), "n3": fresh(-400 * time.Millisecond)}, Healthy, ""},
		// n1 is 11 minutes fast: both peers are 11 minutes behind it.
		{"the odd one out is skewed", []string{"n1", "n2", "n3"},
			map[string]Measurement{"n2": fresh(-11 * time.Minute), "n3": fresh(-11*time.Minute + time.Millisecond)}, Skewed, "n2"},
		// One of three is 11 minutes off: the other two still make a
		// majority.
		{"the majority is healthy", []string{"n1", "n2", "n3"},
			map[string]Measurement{"n2": fresh(0), "n3": fresh(11 * time.Minute)}, Healthy, "n3"},
		{"a peer down, the other agrees", []string{"n1", "n2", "n3"},
			map[string]Measurement{"n2": fresh(0)}, Healthy, ""},
		{"a peer down, the other disagrees", []string{"n1", "n2", "n3"},
			map[string]Measurement{"n2": fresh(time.Minute)}, Unconfirmed, "n2"},
		// Two clocks that disagree: no majority says which is wrong.
		{"two nodes disagree", []string{"n1", "n2"},
			map[string]Measurement{"n2": fresh(time.Minute)}, Unconfirmed, "n2"},
		{"two nodes agree", []string{"n1", "n2"},
			map[string]Measurement{"n2": fresh(time.Millisecond)}, Healthy, ""},
		{"nothing heard yet", []string{"n1", "n2", "n3"}, nil, Unconfirmed, ""},
		{"stale measurements do not count", []string{"n1", "n2", "n3"},
			map[string]Measurement{"n2": {At: 0}, "n3": {At: 0}}, Unconfirmed, ""},
		// The uncertainty of a slow round trip is on the clock's side.
		{"uncertain but possibly within", []string{"n1", "n2"},
			map[string]Measurement{"n2": {Offset: 700 * time.Millisecond, Uncertainty: 300 * time.Millisecond, At: now}}, Healthy, ""},
		{"five nodes, two far", []string{"n1", "n2", "n3", "n4", "n5"},
			map[string]Measurement{"n2": fresh(0), "n3": fresh(0), "n4": fresh(time.Hour), "n5": fresh(-time.Hour)}, Healthy, "n4"},
		{"five nodes, this one far", []string{"n1", "n2", "n3", "n4", "n5"},
			map[string]Measurement{"n2": fresh(time.Hour), "n3": fresh(time.Hour), "n4": fresh(time.Hour)}, Skewed, "n2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMonitor(maxOffset, 5*time.Second)
			for id, meas := range tc.peers {
				m.Record(id, meas)
			}
			v := m.Verdict("n1", tc.members, now)
			if v.State != tc.want {
				t.Fatalf("verdict %v, want %v", v, tc.want)
			}
			if tc.far == "" && len(v.Far) > 0 || tc.far != "" && (len(v.Far) == 0 || v.Far[0].NodeID != tc.far) {
				t.Fatalf("far peers %v, want first %q", v.Far, tc.far)
			}
		})
	}
}

func TestVerdictSaysWhichWayTheClockIsOff(t *testing.T) {
	m := NewMonitor(500*time.Millisecond, 5*time.Second)
	m.Record("n2", Measurement{Offset: -11 * time.Minute, At: time.Second})
	m.Record("n3", Measurement{Offset: -11 * time.Minute, At: time.Second})
	got := m.Verdict("n1", []string{"n1", "n2", "n3"}, time.Second).String()
	for _, want := range []string{"skewed", "1 of 3", "11m0s ahead of n2", "11m0s ahead of n3"} {
		if !strings.Contains(got, want) {
			t.Fatalf("%q does not say %q", got, want)
		}
	}
}

func TestFaultOffsetShiftsTheWallClockOnly(t *testing.T) {
	d, err := FaultOffset("11m")
	if err != nil || d != 11*time.Minute {
		t.Fatalf("FaultOffset(11m) = %v, %v", d, err)
	}
	if d, err := FaultOffset(""); err != nil || d != 0 {
		t.Fatalf("FaultOffset(\"\") = %v, %v", d, err)
	}
	if _, err := FaultOffset("eleven"); err == nil || !strings.Contains(err.Error(), FaultOffsetEnv) {
		t.Fatalf("a bad offset: %v, want an error naming %s", err, FaultOffsetEnv)
	}
	s := NewSystem(11 * time.Minute)
	if ahead := s.Now().Sub(time.Now()); ahead < 11*time.Minute-time.Second || ahead > 11*time.Minute+time.Second {
		t.Fatalf("the clock is %v ahead, want 11m", ahead)
	}
	mono := s.Monotonic()
	s.SetOffset(-time.Hour)
	if s.Now().After(time.Now().Add(-59 * time.Minute)) {
		t.Fatal("SetOffset did not step the wall clock")
	}
	if s.Monotonic() < mono {
		t.Fatal("the monotonic clock went back when the wall clock stepped")
	}
}
