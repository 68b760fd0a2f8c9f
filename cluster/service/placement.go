package service

import (
	"sync"

	clusterv1 "github.com/raftbus/raftbus/proto/raftbus/cluster/v1"
)

// placeEvery is how many messages free to go to any partition a node puts
// on one partition before it moves on to the next it leads: enough that
// the messages of concurrent senders meet in that partition's entries,
// few enough that under load each partition gets its share within a second
// or so.
const placeEvery = 1024

// maxPlaced bounds the entities a node remembers a partition of the moment
// for; past it the memory starts afresh.
const maxPlaced = 4096

// placements are the node's partitions of the moment, one per entity: where
// it puts messages that may go to any partition (no session id or
// partition key, no MessageId the entity detects duplicates by).
//
// A Raft entry costs every replica about the same whatever it carries
// (writes, a sync, round trips, wake-ups), and a partition proposes one
// entry at a time, gathering what arrives meanwhile into the next. Sent to
// partitions of their senders' choosing, such messages spread over every
// partition a node leads and most requests start an entry of their own: a
// 16-partition queue made entries of 13 messages where one partition made
// 67. Put on one partition at a time, the requests of every sender that
// reach the node meet in that partition's entries, and the partitions take
// turns every placeEvery messages. (Moving on whenever the partition had
// no entry on its way, so that sends one after another would still take
// turns, kept entries at 16 messages: under load a partition's pipeline is
// idle often enough.)
type placements struct {
	mu sync.Mutex
	at map[string]*placement
}

// placement is the partition of the moment of one entity.
type placement struct {
	id    uint32
	taken int // messages put on id since it became the partition of the moment
}

// place returns the partition of e that n messages free to go anywhere go
// to: the partition of the moment while this node leads it and it has
// taken fewer than placeEvery, else the next partition the node leads
// (leads tells). ok is false when the node leads none of e's partitions.
func (p *placements) place(e *clusterv1.Entity, n int, leads func(id uint32) bool) (id uint32, ok bool) {
	parts := uint32(len(e.GetPartitions()))
	if parts == 0 {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.at[e.GetName()]
	if pl == nil {
		if p.at == nil || len(p.at) >= maxPlaced {
			p.at = make(map[string]*placement)
		}
		// The first placement moves on from the last partition: to the
		// first led here.
		pl = &placement{id: parts - 1, taken: placeEvery}
		p.at[e.GetName()] = pl
	}
	if pl.id < parts && pl.taken < placeEvery && leads(pl.id) {
		pl.taken += n
		return pl.id, true
	}
	for k := uint32(1); k <= parts; k++ {
		next := (pl.id + k) % parts
		if leads(next) {
			pl.id, pl.taken = next, n
			return next, true
		}
	}
	return 0, false
}
