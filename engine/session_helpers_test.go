package engine

import (
	"cmp"
	"slices"
	"testing"
	"time"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// heldSessionLock is a session as its holder knows it.
type heldSessionLock struct {
	id    string
	token []byte
}

func newSessionHarness(t testing.TB, props *raftbusv1.QueueProperties) *harness {
	if props == nil {
		props = &raftbusv1.QueueProperties{}
	}
	props.RequiresSession = ptr(true)
	if props.LockDuration == nil {
		props.LockDuration = dur(30 * time.Second)
	}
	return newHarness(t, props)
}

// sendTo sends one message per id to the session, in order.
func (h *harness) sendTo(session string, ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.send(&raftbusv1.Message{MessageId: id, SessionId: session, Body: []byte(id)})
	}
}

func acceptCmd(id string) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_AcceptSession{AcceptSession: &enginev1.AcceptSession{EntityPath: testQueue, SessionId: id}}}
}

func (h *harness) accept(id string) heldSessionLock {
	h.t.Helper()
	r := h.ok(acceptCmd(id)).GetAcceptSession()
	return heldSessionLock{r.GetSessionId(), r.GetLockToken()}
}

func sessionLockCmd(s heldSessionLock, mode raftbusv1.ReceiveMode, n int32) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{
		EntityPath: testQueue, ReceiveMode: mode, MaxMessages: n, SessionId: s.id, SessionLockToken: s.token,
	}}}
}

func (h *harness) receiveIn(s heldSessionLock, n int32) []*raftbusv1.ReceivedMessage {
	h.t.Helper()
	return h.ok(sessionLockCmd(s, peekLock, n)).GetLock().GetMessages()
}

func sessionSettleCmd(s heldSessionLock, token []byte, d enginev1.Disposition) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_Settle{Settle: &enginev1.Settle{
		EntityPath: testQueue, LockToken: token, Disposition: d, SessionId: s.id, SessionLockToken: s.token,
	}}}
}

func setStateCmd(s heldSessionLock, state []byte) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_SetSessionState{SetSessionState: &enginev1.SetSessionState{
		EntityPath: testQueue, SessionId: s.id, LockToken: s.token, State: state,
	}}}
}

func releaseCmd(s heldSessionLock) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_ReleaseSession{ReleaseSession: &enginev1.ReleaseSession{
		EntityPath: testQueue, SessionId: s.id, LockToken: s.token,
	}}}
}

func renewSessionCmd(s heldSessionLock) *enginev1.Command {
	return &enginev1.Command{Body: &enginev1.Command_RenewSessionLock{RenewSessionLock: &enginev1.RenewSessionLock{
		EntityPath: testQueue, SessionId: s.id, LockToken: s.token,
	}}}
}

// checkSessionInvariants verifies that the session index of an entity
// agrees with its messages.
func checkSessionInvariants(t testing.TB, ent *entity) {
	t.Helper()
	x := ent.main.sessions
	if x == nil {
		return
	}
	// Messages in transfer belong to no session.
	if int64(len(x.owner)) != int64(ent.main.all.Len())-ent.main.transferCount {
		t.Fatalf("%s: %d messages have a session, %d are stored, %d of them in transfer", ent.path, len(x.owner), ent.main.all.Len(), ent.main.transferCount)
	}
	all := map[*session][]*message{}
	active := map[*session][]*message{}
	locked := map[*session][]*message{}
	ent.main.all.ascend(0, func(m *message) bool {
		if m.state == stateTransfer {
			return true
		}
		s := x.owner[m]
		if s == nil || x.byID[s.id] != s {
			t.Fatalf("%s: message %d is not in a known session", ent.path, m.seq)
		}
		all[s] = append(all[s], m)
		isActive := m.state == stateAvailable || (m.state == stateLocked && !m.lockedFromDeferred)
		if isActive != m.sessionActive {
			t.Fatalf("%s: message %d in state %d: session active %v", ent.path, m.seq, m.state, m.sessionActive)
		}
		if isActive {
			active[s] = append(active[s], m)
		}
		if m.state == stateLocked {
			locked[s] = append(locked[s], m)
		}
		return true
	})
	var withMessages, stateBytes int64
	var ready, expiring int
	for id, s := range x.byID {
		stateBytes += int64(len(s.state))
		if s.id != id {
			t.Fatalf("%s: session %q filed as %q", ent.path, s.id, id)
		}
		if s.all.Len() == 0 && !s.held() && len(s.state) == 0 {
			t.Fatalf("%s: empty session %q remembered", ent.path, id)
		}
		if s.all.Len() > 0 {
			withMessages++
		}
		for _, c := range []struct {
			name string
			log  *messageLog
			want []*message
		}{{"all", &s.all, all[s]}, {"active", &s.active, active[s]}} {
			var got []*message
			c.log.ascend(0, func(m *message) bool { got = append(got, m); return true })
			if !slices.Equal(got, c.want) || c.log.Len() != len(c.want) {
				t.Fatalf("%s: session %q %s index has %d messages, want %d", ent.path, id, c.name, len(got), len(c.want))
			}
		}
		gotLocked := slices.Clone(s.locked)
		slices.SortFunc(gotLocked, func(a, b *message) int { return cmp.Compare(a.order, b.order) })
		if !slices.Equal(gotLocked, locked[s]) {
			t.Fatalf("%s: session %q lists %d locked messages, want %d", ent.path, id, len(s.locked), len(locked[s]))
		}
		if len(s.locked) > 0 && !s.held() {
			t.Fatalf("%s: session %q has locked messages but no holder", ent.path, id)
		}
		if wantReady := !s.held() && s.head() != nil; wantReady != (s.readyIdx >= 0) {
			t.Fatalf("%s: session %q ready index %d, want ready %v", ent.path, id, s.readyIdx, wantReady)
		} else if wantReady {
			ready++
			if x.ready.items[s.readyIdx] != s || s.head().order < x.ready.top().head().order {
				t.Fatalf("%s: session %q misplaced in the ready heap", ent.path, id)
			}
		}
		if s.held() != (s.lockIdx >= 0) {
			t.Fatalf("%s: session %q held %v, lock index %d", ent.path, id, s.held(), s.lockIdx)
		} else if s.held() {
			expiring++
			if x.expiring.items[s.lockIdx] != s || s.lockedUntil < x.expiring.top().lockedUntil {
				t.Fatalf("%s: session %q misplaced in the expiry heap", ent.path, id)
			}
		}
	}
	for tok, m := range x.lost {
		if x.lostBy[m] != tok || x.owner[m] == nil || m.state == stateLocked {
			t.Fatalf("%s: lost lock token %x of message %d (state %d) out of place", ent.path, tok[:], m.seq, m.state)
		}
	}
	if len(x.lost) != len(x.lostBy) {
		t.Fatalf("%s: %d lost lock tokens, %d messages with one", ent.path, len(x.lost), len(x.lostBy))
	}
	if withMessages != x.withMessages || ready != len(x.ready.items) || expiring != len(x.expiring.items) || stateBytes != x.stateBytes {
		t.Fatalf("%s: %d sessions with messages (recorded %d), %d ready (heap %d), %d held (heap %d), %d bytes of state (recorded %d)",
			ent.path, withMessages, x.withMessages, ready, len(x.ready.items), expiring, len(x.expiring.items), stateBytes, x.stateBytes)
	}
}
