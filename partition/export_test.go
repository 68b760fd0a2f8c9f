package partition

import "github.com/hashicorp/raft"

// WrapLogStore makes the replica opened with c write its Raft log through
// wrap.
func WrapLogStore(c *Config, wrap func(raft.LogStore) raft.LogStore) { c.wrapLogStore = wrap }

// QueuedProposals is how many proposals wait for the proposer.
func (p *Partition) QueuedProposals() int { return len(p.proposals) }
