package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/raftbus/raftbus/test/history"
)

// replicas checks the digests taken once the cluster settled: the replicas
// of each partition must have applied the same log (caught up) and hold
// the same state.
func (c *run) replicas() []string {
	type part struct {
		entity    string
		partition uint32
	}
	byPart := make(map[part][]*history.Op)
	var parts []part
	for _, op := range c.digests {
		p := part{op.Entity, op.Partition}
		if _, ok := byPart[p]; !ok {
			parts = append(parts, p)
		}
		byPart[p] = append(byPart[p], op)
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].entity != parts[j].entity {
			return parts[i].entity < parts[j].entity
		}
		return parts[i].partition < parts[j].partition
	})
	var out []string
	for _, p := range parts {
		ops := byPart[p]
		sort.Slice(ops, func(i, j int) bool { return ops[i].Node < ops[j].Node })
		name := fmt.Sprintf("%s partition %d", p.entity, p.partition)
		var desc []string
		sameIndex, sameDigest, failed := true, true, false
		for _, op := range ops {
			if op.Outcome != history.OK {
				failed = true
				out = append(out, fmt.Sprintf("%s: the replica on %s did not answer: %s", name, op.Node, op.Error))
				continue
			}
			desc = append(desc, fmt.Sprintf("%s at %d %.12s", op.Node, op.Applied, op.Digest))
			sameIndex = sameIndex && op.Applied == ops[0].Applied
			sameDigest = sameDigest && op.Digest == ops[0].Digest
		}
		switch {
		case failed:
		case !sameIndex:
			out = append(out, fmt.Sprintf("%s: replicas did not catch up: %s", name, strings.Join(desc, ", ")))
		case !sameDigest:
			out = append(out, fmt.Sprintf("%s: replicas applied the same log and differ: %s", name, strings.Join(desc, ", ")))
		}
	}
	return out
}

// faultFailures lists faults the cluster did not take as it must.
func (c *run) faultFailures() []string {
	var out []string
	for _, f := range c.failed {
		out = append(out, fmt.Sprintf("%s at %v: %s", f.Fault, at(f.Start), f.Error))
	}
	return out
}

// vanishedEntities lists entities that a delete or the final drain found
// gone though no delete had been attempted before, while they were known to
// exist (their creation was acknowledged, or they delivered messages): the
// broker removed them, or reported a delete that happened as failed (with
// the messages they held).
func (c *run) vanishedEntities() []string {
	delivered := make(map[string]bool)
	for k, cp := range c.copies {
		if len(cp.deliveries) > 0 {
			delivered[k.entity] = true
		}
	}
	var out []string
	for _, e := range c.entities {
		op := e.notFound
		if op == nil || (!e.createKnown && !delivered[e.path]) {
			continue
		}
		what := "a delete"
		if op.Kind == history.Drain {
			what = "the final drain"
		}
		out = append(out, fmt.Sprintf("%s, known to exist, was gone when %s reached it at %v-%v: %s", e.path, what, at(op.Start), at(op.End), op.Error))
	}
	sort.Strings(out)
	return out
}
