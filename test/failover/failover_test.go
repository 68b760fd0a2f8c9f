package failover

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/cluster"
	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/test/checker"
	"github.com/raftbus/raftbus/test/history"
	"github.com/raftbus/raftbus/test/nemesis"
	"github.com/raftbus/raftbus/test/netns"
	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

// mix is what a run does: the faults and the workload's features.
type mix struct {
	name string
	// faults without and with network namespaces.
	processFaults, networkFaults []nemesis.Kind
	// inTurn takes the faults in turn rather than at random.
	inTurn         bool
	interval, hold time.Duration
	// features of the workload (see start).
	features []string
	changes  []string
}

// The workload's features.
const (
	featureQueue     = "queue"     // producers with MessageIds, PeekLock consumers
	featureSessions  = "sessions"  // session producer and workers with state
	featureSchedule  = "schedule"  // scheduled messages, some cancelled
	featureAnonymous = "anonymous" // sends without MessageIds, some with a TTL, ReceiveAndDelete consumer
	featureTopic     = "topic"     // topic with filtered subscriptions
	featureChanges   = "changes"   // entity and rule changes
	featureForward   = "forward"   // a queue forwarding to another, PeekLock consumer of the target
)

var allFeatures = []string{featureQueue, featureSessions, featureSchedule, featureAnonymous, featureTopic, featureChanges, featureForward}

// ciMix is the 45 s run of `go test ./test/failover` on three nodes:
// every feature, and every fault but those that need more nodes (two
// down at once, the majorities ring, a drain).
var ciMix = mix{
	name:          "ci",
	processFaults: []nemesis.Kind{nemesis.Kill, nemesis.KillLeader, nemesis.Pause, nemesis.KillAll, nemesis.Term, nemesis.ClockSkew, nemesis.RollingRestart, nemesis.DiskFail},
	networkFaults: []nemesis.Kind{nemesis.Isolate, nemesis.IsolateLeader, nemesis.Bridge, nemesis.Loss, nemesis.Slow},
	interval:      3 * time.Second, hold: 2 * time.Second,
	features: allFeatures,
	changes:  []string{ChangeSubscriptions, ChangeRules, ChangeSettings, ChangeQueues},
}

// soakMix is scripts/failover.sh: everything, more often, held longer
// (up to three lock durations).
var soakMix = mix{
	name:          "soak",
	processFaults: append(slices.Clip(nemesis.ProcessKinds), nemesis.DiskKinds...),
	networkFaults: nemesis.NetworkKinds,
	interval:      2 * time.Second, hold: 4 * time.Second,
	features: allFeatures,
	changes:  []string{ChangeSubscriptions, ChangeRules, ChangeSettings, ChangeQueues},
}

// lateEffect is how long after its client gave up a request the faults
// of m may deliver it (see checker.Options.LateEffect): a fault holds
// packets up to 1.5 × hold (see nemesis.Run), and TCP, retransmitting at
// intervals that double, delivers what it held at most about as long
// after the heal.
func (m mix) lateEffect() time.Duration { return 3 * m.hold }

// settings of a run, from the environment: RAFTBUS_FAILOVER_DURATION (of
// the faults; default 45s), RAFTBUS_FAILOVER_SEED (default: from the
// clock, printed), RAFTBUS_FAILOVER_NODES (3 or 5, default 3),
// RAFTBUS_FAILOVER_SOAK (set: the soak's mix of faults and features),
// RAFTBUS_FAILOVER_TLS (0: plain TCP; default mutual TLS between nodes
// and access policies, the workload signing with the root key, as in
// production),
// RAFTBUS_FAILOVER_FAULTS and RAFTBUS_FAILOVER_FEATURES (comma-separated:
// only these) and RAFTBUS_FAILOVER_HISTORY (where to keep the history;
// default a temp dir).
func settings(t *testing.T) (dur time.Duration, seed uint64, nodes int, m mix, opts procs.Options) {
	dur, seed, nodes, m, opts = 45*time.Second, uint64(time.Now().UnixNano()), 3, ciMix, procs.Options{TLS: true, Auth: true}
	if v := os.Getenv("RAFTBUS_FAILOVER_TLS"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			t.Fatalf("RAFTBUS_FAILOVER_TLS: %v", err)
		}
		opts.TLS, opts.Auth = on, on
	}
	if v := os.Getenv("RAFTBUS_FAILOVER_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("RAFTBUS_FAILOVER_DURATION: %v", err)
		}
		dur = d
	}
	if v := os.Getenv("RAFTBUS_FAILOVER_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("RAFTBUS_FAILOVER_SEED: %v", err)
		}
		seed = s
	}
	if v := os.Getenv("RAFTBUS_FAILOVER_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 3 && n != 5) {
			t.Fatalf("RAFTBUS_FAILOVER_NODES must be 3 or 5, not %q", v)
		}
		nodes = n
	}
	if os.Getenv("RAFTBUS_FAILOVER_SOAK") != "" {
		m = soakMix
	}
	// To narrow a failure down: only these faults ("none" for none) or
	// features.
	if v := os.Getenv("RAFTBUS_FAILOVER_FAULTS"); v != "" {
		m.processFaults, m.networkFaults = nil, nil
		for _, k := range strings.Split(v, ",") {
			switch {
			case k == "none":
			case slices.Contains(nemesis.ProcessKinds, nemesis.Kind(k)), slices.Contains(nemesis.DiskKinds, nemesis.Kind(k)):
				m.processFaults = append(m.processFaults, nemesis.Kind(k))
			case slices.Contains(nemesis.NetworkKinds, nemesis.Kind(k)):
				m.networkFaults = append(m.networkFaults, nemesis.Kind(k))
			default:
				t.Fatalf("RAFTBUS_FAILOVER_FAULTS: no fault %q (kinds: %v %v %v)", k, nemesis.ProcessKinds, nemesis.DiskKinds, nemesis.NetworkKinds)
			}
		}
	}
	if v := os.Getenv("RAFTBUS_FAILOVER_FEATURES"); v != "" {
		m.features = strings.Split(v, ",")
		for _, f := range m.features {
			if !slices.Contains(allFeatures, f) {
				t.Fatalf("RAFTBUS_FAILOVER_FEATURES: no feature %q (features: %v)", f, allFeatures)
			}
		}
	}
	return dur, seed, nodes, m, opts
}

// checkOptions are the checker's tolerances. ClockUncertainty is the
// broker's bound on the clock offset of a node that stamps time (plus
// rounding to milliseconds): a node skewed further (the skew fault) must
// stamp nothing, and the checker holds the broker to that.
var checkOptions = checker.Options{ScheduleTolerance: 50 * time.Millisecond,
	ClockUncertainty: cluster.DefaultMaxClockOffset + 10*time.Millisecond, ExpiryGrace: 2 * time.Second}

// TestFailover runs the workload through the SDK against real raftbusd
// processes while a seeded nemesis kills, stops, pauses and restarts
// nodes (and, with root, partitions the network and makes links lossy
// and slow), then drains every entity, compares the replicas and checks
// the history (see package checker for the rules).
func TestFailover(t *testing.T) {
	dur, seed, nodes, m, opts := settings(t)
	runFailover(t, dur, seed, nodes, m, opts)
}

// plannedMix is what operators do to a healthy cluster: drain a node and
// take it back, restart every node in turn, replace a dead node by a new
// one (and remove the old id). Four nodes, so that a drained node's
// replicas have somewhere to go.
var plannedMix = mix{
	name:          "planned operations",
	processFaults: []nemesis.Kind{nemesis.Replace, nemesis.Drain, nemesis.RollingRestart},
	inTurn:        true,
	interval:      2 * time.Second, hold: 6 * time.Second,
	features: allFeatures,
	changes:  []string{ChangeSubscriptions, ChangeRules, ChangeSettings, ChangeQueues},
}

// TestPlannedOperations runs the workload on four nodes while nodes are
// drained and taken back, restarted in turn and replaced: the history
// must be as clean as under faults, and the report says how long each
// operation left partitions unavailable. RAFTBUS_FAILOVER_DURATION,
// _SEED and _TLS apply as to TestFailover.
func TestPlannedOperations(t *testing.T) {
	dur, seed, _, _, opts := settings(t)
	runFailover(t, dur, seed, 4, plannedMix, opts)
}

func runFailover(t *testing.T, dur time.Duration, seed uint64, nodes int, m mix, opts procs.Options) {
	t.Logf("failover run (%s): %v of faults, seed %d, %d nodes, TLS and auth %v (RAFTBUS_FAILOVER_SEED=%d repeats the faults' choices)", m.name, dur, seed, nodes, opts.TLS, seed)

	kinds := m.processFaults
	// The disk fault needs each node on a disk of its own; without, it
	// is never applied.
	if err := procs.DisksSupported(); err == nil {
		opts.Disks = true
	} else if slices.ContainsFunc(kinds, func(k nemesis.Kind) bool { return slices.Contains(nemesis.DiskKinds, k) }) {
		t.Logf("disk faults skipped: %v", err)
	}
	var cluster *procs.Cluster
	var network *netns.Network
	if err := netns.Available(); err == nil {
		// Each test its own names and subnet: the kernel removes the
		// links of a closed network in the background.
		tag, third := "f", 150
		if m.name == plannedMix.name {
			tag, third = "p", 200
		}
		nw, err := netns.New(fmt.Sprintf("%s%d", tag, os.Getpid()%10000), third+os.Getpid()%50, nodes)
		if err != nil {
			t.Fatal(err)
		}
		network = nw
		cluster = procs.StartOnWith(t, raftbusd, nw.Hosts(), opts)
		// Cleanups run last first: this one, before the cluster's, stops
		// the processes and then removes the namespaces they ran in.
		t.Cleanup(func() {
			for i := range cluster.Nodes {
				cluster.Kill(i)
			}
			if err := nw.Close(); err != nil {
				t.Error(err)
			}
		})
		kinds = append(append([]nemesis.Kind{}, kinds...), m.networkFaults...)
	} else {
		t.Logf("network faults skipped: %v; process faults only", err)
		cluster = procs.StartWith(t, raftbusd, nodes, opts)
	}

	copts := &client.ClientOptions{
		RetryOptions: client.RetryOptions{MaxRetries: 3, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond},
		TLSConfig:    cluster.ClientTLS(),
	}
	var c *client.Client
	var err error
	if opts.Auth {
		await.Until(t, 30*time.Second, "the root access key", func() bool { return cluster.RootConnectionString() != "" })
		c, err = client.NewClientFromConnectionString(cluster.RootConnectionString(), copts)
	} else {
		c, err = client.New(cluster.Addrs(), copts)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	historyPath := os.Getenv("RAFTBUS_FAILOVER_HISTORY")
	if historyPath == "" {
		// Next to the nodes' files, so that a failed run keeps it with them.
		historyPath = filepath.Join(cluster.Dir, "history.jsonl")
	}
	rec, err := history.Create(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Client: c, Admin: admin.NewFromClient(c), History: rec, OpTimeout: 3 * time.Second, Seed: seed, NodeTLS: cluster.NodeTLS()}
	setup, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Setup(setup); err != nil {
		t.Fatal(err)
	}

	run, stop := context.WithTimeout(context.Background(), dur)
	defer stop()
	var wg sync.WaitGroup
	for _, f := range w.processes(m) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(run)
		}()
	}
	n := &nemesis.Nemesis{Cluster: cluster, Network: network, Entity: WorkQueue, Kinds: kinds, InTurn: m.inTurn,
		Rand: rand.New(rand.NewPCG(seed, seed>>1)), History: rec, Log: t.Logf}
	faults, err := n.Run(run, m.interval, m.hold)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	// Healed: every node up and answering before the drain.
	for i := range cluster.Nodes {
		cluster.Resume(i)
		cluster.WaitReady(i, 60*time.Second)
	}
	finish, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.Finish(finish); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	ops, err := history.ReadFile(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	tolerances := checkOptions
	tolerances.LateEffect = m.lateEffect()
	report := checker.Check(ops, tolerances)
	t.Logf("%d faults injected; history in %s\n%s", faults, historyPath, report)
	if report.Acknowledged < 100 {
		t.Errorf("only %d messages acknowledged: the workload hardly ran", report.Acknowledged)
	}
	if !report.OK() {
		t.Errorf("the history breaks the rules (seed %d)", seed)
	}
}

// processes are the workload's processes for the features of m.
func (w *Workload) processes(m mix) []func(context.Context) {
	var out []func(context.Context)
	for _, f := range m.features {
		switch f {
		case featureQueue:
			for range 3 {
				out = append(out, func(ctx context.Context) { w.Produce(ctx, false) }, w.Consume)
			}
		case featureSessions:
			out = append(out, func(ctx context.Context) { w.Produce(ctx, true) }, w.ProcessSessions, w.ProcessSessions)
		case featureSchedule:
			out = append(out, w.Schedule)
		case featureAnonymous:
			out = append(out, w.ProduceAnonymous, w.ConsumeAndDelete)
		case featureTopic:
			out = append(out, w.ProduceTopic, w.ConsumeTopic)
		case featureForward:
			out = append(out, w.ProduceForwarded, w.ConsumeForwarded)
		case featureChanges:
			out = append(out, func(ctx context.Context) { w.ChangeEntities(ctx, m.changes, 1500*time.Millisecond) })
		}
	}
	return out
}
