package failover

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/test/checker"
	"github.com/raftbus/raftbus/test/history"
	"github.com/raftbus/raftbus/test/nemesis"
	"github.com/raftbus/raftbus/test/netns"
	"github.com/raftbus/raftbus/test/procs"
)

var raftbusd string

func TestMain(m *testing.M) { os.Exit(procs.RunTests(m, &raftbusd)) }

// settings of a run, from the environment: RAFTBUS_FAILOVER_DURATION (of
// the faults; default 45s), RAFTBUS_FAILOVER_SEED (default: from the
// clock, printed), RAFTBUS_FAILOVER_NODES (3 or 5, default 3) and
// RAFTBUS_FAILOVER_HISTORY (where to keep the history; default a temp dir).
func settings(t *testing.T) (dur time.Duration, seed uint64, nodes int) {
	dur, seed, nodes = 45*time.Second, uint64(time.Now().UnixNano()), 3
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
	return dur, seed, nodes
}

// TestFailover runs producers, consumers, session workers and scheduled
// messages through the SDK against real raftbusd processes while a seeded
// nemesis kills, pauses and restarts nodes (and, with root, cuts nodes and
// leaders off the network), then drains every queue and checks the
// history: nothing acknowledged lost, nothing delivered after its complete
// was acknowledged, sequence numbers sound, sessions in order, schedules
// kept.
func TestFailover(t *testing.T) {
	dur, seed, nodes := settings(t)
	t.Logf("failover run: %v of faults, seed %d, %d nodes (RAFTBUS_FAILOVER_SEED=%d repeats the faults' choices)", dur, seed, nodes, seed)

	kinds := nemesis.ProcessKinds
	var cluster *procs.Cluster
	var network *netns.Network
	if err := netns.Available(); err == nil {
		nw, err := netns.New(fmt.Sprintf("f%d", os.Getpid()%10000), 150+os.Getpid()%50, nodes)
		if err != nil {
			t.Fatal(err)
		}
		network = nw
		cluster = procs.StartOn(t, raftbusd, nw.Hosts())
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
		kinds = append(append([]nemesis.Kind{}, kinds...), nemesis.NetworkKinds...)
	} else {
		t.Logf("network faults skipped: %v; process faults only", err)
		cluster = procs.Start(t, raftbusd, nodes)
	}

	c, err := client.New(cluster.Addrs(), &client.ClientOptions{RetryOptions: client.RetryOptions{MaxRetries: 3, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	adm := admin.NewFromClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	queueProps := &admin.QueueProperties{
		PartitionCount: proto.Uint32(3), RequiresDuplicateDetection: proto.Bool(true),
		LockDuration: durationpb.New(2 * time.Second), MaxDeliveryCount: proto.Int32(5),
	}
	create := func(name string, props *admin.QueueProperties) {
		t.Helper()
		// A cluster just formed may not have elected its metadata leader.
		for {
			_, err := adm.CreateQueue(ctx, name, props)
			var ce *client.Error
			switch {
			case err == nil, errors.As(err, &ce) && ce.Code == client.CodeAlreadyExists:
				return
			case errors.As(err, &ce) && ce.Retryable && ctx.Err() == nil:
				time.Sleep(100 * time.Millisecond)
			default:
				t.Fatalf("create %s: %v", name, err)
			}
		}
	}
	create("work", queueProps)
	sessionProps := proto.Clone(queueProps).(*admin.QueueProperties)
	sessionProps.RequiresSession, sessionProps.PartitionCount = proto.Bool(true), proto.Uint32(2)
	create("sessions", sessionProps)

	historyPath := os.Getenv("RAFTBUS_FAILOVER_HISTORY")
	if historyPath == "" {
		historyPath = filepath.Join(t.TempDir(), "history.jsonl")
	}
	rec, err := history.Create(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Client: c, History: rec, Queue: "work", SessionQueue: "sessions", OpTimeout: 3 * time.Second, Seed: seed}

	run, stop := context.WithTimeout(context.Background(), dur)
	defer stop()
	var wg sync.WaitGroup
	spawn := func(f func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(run)
		}()
	}
	for range 3 {
		spawn(func(ctx context.Context) { w.Produce(ctx, false) })
		spawn(w.Consume)
	}
	spawn(func(ctx context.Context) { w.Produce(ctx, true) })
	spawn(w.ProcessSessions)
	spawn(w.ProcessSessions)
	spawn(w.Schedule)

	n := &nemesis.Nemesis{Cluster: cluster, Network: network, Entity: "work", Kinds: kinds,
		Rand: rand.New(rand.NewPCG(seed, seed>>1)), History: rec, Log: t.Logf}
	faults, err := n.Run(run, 3*time.Second, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// Healed: every node up and answering before the drain.
	for i := range cluster.Nodes {
		cluster.Resume(i)
		cluster.WaitReady(i, 60*time.Second)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer dcancel()
	for _, q := range []string{"work", "sessions"} {
		for _, dlq := range []bool{false, true} {
			if err := w.Drain(dctx, q, dlq); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	ops, err := history.ReadFile(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	report := checker.Check(ops, checker.Options{ScheduleTolerance: 50 * time.Millisecond})
	t.Logf("%d faults injected; history in %s\n%s", faults, historyPath, report)
	if report.Acknowledged < 100 {
		t.Errorf("only %d messages acknowledged: the workload hardly ran", report.Acknowledged)
	}
	if !report.OK() {
		t.Errorf("the history breaks the rules (seed %d)", seed)
	}
}
