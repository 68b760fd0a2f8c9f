package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestKeylessSendsGatherAcrossLeadersAndLeaveForOnePartition has four
// partitions led by two nodes in turn. Two keyless sends go out at once
// and are held; forty more arrive meanwhile. They must gather into one
// request, to one partition, at its leader: had each taken the partition of
// the moment when it was sent, they would have gathered per leader node,
// and each move of that partition to the other node would have started a
// request there with the first message to come.
func TestKeylessSendsGatherAcrossLeadersAndLeaveForOnePartition(t *testing.T) {
	var a, b fakeNode
	leaders := func() []string { return []string{a.addr, b.addr, a.addr, b.addr} }
	a.partitions, b.partitions = leaders, leaders
	release := make(chan struct{})
	var mu sync.Mutex
	var reqs []string // "node: partition of each message"
	held := make(chan struct{}, 2)
	serve := func(f *fakeNode) func(*raftbusv1.SendEachRequest) {
		return func(req *raftbusv1.SendEachRequest) {
			parts := map[uint32]int{}
			for _, m := range req.GetMessages() {
				parts[m.GetPartitionId()]++
			}
			mu.Lock()
			first := len(reqs) < 2
			reqs = append(reqs, fmt.Sprintf("%s: %v", map[string]string{a.addr: "a", b.addr: "b"}[f.addr], parts))
			mu.Unlock()
			for id := range parts {
				if leaders()[id] != f.addr {
					t.Errorf("partition %d's message came to %s, which does not lead it", id, f.addr)
				}
			}
			if first {
				held <- struct{}{}
				<-release
			}
		}
	}
	a.onSendEach, b.onSendEach = serve(&a), serve(&b)
	startFake(t, &a)
	startFake(t, &b)
	c := fastClient(t, a.addr)
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	send := func(n int) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.SendMessage(ctx, &Message{Body: []byte(fmt.Sprint(i))}, nil); err != nil {
					t.Errorf("send: %v", err)
				}
			}()
		}
	}
	send(1)
	<-held
	send(1)
	<-held
	send(40)
	await.Until(t, 10*time.Second, "forty sends to gather", func() bool {
		s.singles.mu.Lock()
		defer s.singles.mu.Unlock()
		n := 0
		for _, q := range s.singles.queues {
			n += len(q.waiting)
		}
		return n == 40
	})
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 3 || reqs[0] != "a: map[0:1]" || reqs[1] != "b: map[1:1]" || reqs[2] != "a: map[2:40]" {
		t.Fatalf("requests %q, want one message to partition 0 at a, one to 1 at b, then forty to 2 at a", reqs)
	}
}
