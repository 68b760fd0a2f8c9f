package checker

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/raftbus/raftbus/test/history"
)

// sessionOrder checks that within a session, messages were settled
// (completed or dead-lettered by the client) in sequence order.
func (c *run) sessionOrder() []string {
	var inSession []history.Op
	for _, op := range c.settles {
		if op.SessionID != "" {
			inSession = append(inSession, *op)
		}
	}
	type session struct{ entity, id string }
	return increasing(inSession, func(op history.Op) any { return session{op.Entity, op.SessionID} },
		func(a, b history.Op) string {
			return fmt.Sprintf("%s session %s: %s (seq %d) processed after %s (seq %d)", a.Entity, a.SessionID, b.MessageID, b.Seq, a.MessageID, a.Seq)
		})
}

// sessionStates checks that a session's state never goes backwards: a
// read returns at least what an acknowledged write or an earlier read
// showed before it started (the workload only ever writes larger values
// while it holds the session), and only values someone wrote.
func (c *run) sessionStates() []string {
	keys := make([][2]string, 0, len(c.states))
	for k := range c.states {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	var out []string
	for _, k := range keys {
		ops := c.states[k]
		written := map[string]bool{"": true}
		for _, op := range ops {
			if op.Kind == history.SetState && op.Outcome != history.Fail {
				written[op.State] = true
			}
		}
		for _, g := range ops {
			if g.Kind != history.GetState || g.Outcome != history.OK {
				continue
			}
			name := fmt.Sprintf("%s session %s", k[0], k[1])
			if !written[g.State] {
				out = append(out, fmt.Sprintf("%s: read %q at %v, which nobody wrote", name, g.State, at(g.End)))
				continue
			}
			var floor *history.Op
			for _, op := range ops {
				if op.End < g.Start && op.Outcome == history.OK && (op.Kind == history.SetState || op.Kind == history.GetState) &&
					(floor == nil || stateValue(op.State) > stateValue(floor.State)) {
					floor = op
				}
			}
			if floor != nil && stateValue(g.State) < stateValue(floor.State) {
				out = append(out, fmt.Sprintf("%s: read %q at %v after %s of %q was acknowledged at %v",
					name, g.State, at(g.End), floor.Kind, floor.State, at(floor.End)))
			}
		}
	}
	return out
}

// stateValue reads a state the workload wrote: a number, empty for none.
func stateValue(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return v
}
