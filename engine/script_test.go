package engine

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// TestScripts runs the scenarios in testdata/*.txt (github.com/cockroachdb/datadriven):
// one queue, "orders", of one partition, driven by commands stamped as a
// partition leader stamps them, with the engine's answers printed for
// comparison with the expected output. Every command is followed by the
// check of every index and count (checkInvariants). After a deliberate
// change, "go test -run TestScripts -args -rewrite" writes the new
// output; read the diff before committing it.
//
// Times are printed and given as the time since the scenario began.
// Messages are named by their ids, a lock token by the message it locks
// (m0: the last handed out for m0; m0#2: the second), a session lock by
// its session id.
//
//	queue [requires-session] [lock=D] [ttl=D] [max-delivery=N] [dead-letter-on-expiry[=B]]
//	    [forward-to=E] [forward-dlq-to=E]
//	    a new engine with the queue, the clock at 0; every scenario starts with one
//	configure [settings as for queue]    configure the queue again
//	leader-version N|current             the engine version stamped on commands
//	advance D                            move the clock
//	tick                                 apply what is due
//	send [session=S] ID...               one command per message, body = id
//	send|schedule [session=S]            one command with a message per input line:
//	    ID [session=S] [ttl=D] [at=T] [body=B]
//	cancel SEQ...                        cancel scheduled messages
//	receive [n=N] [dlq] [delete] [session=S] [lock-token=L] [full]
//	receive-deferred [dlq] [delete] [session=S] [lock-token=L] [full] SEQ...
//	complete|abandon|dead-letter|defer MSG [dlq] [session=S] [lock-token=L]
//	    [reason=R] [description=D] [property=K:V]
//	renew MSG [session=S] [lock-token=L]
//	accept [session=S] [session-length=N|max|max+1]
//	release|renew-session|get-state session=S [lock-token=L]
//	set-state session=S [lock-token=L] [value=V | size=N|max|max+1]
//	peek [dlq] [from=SEQ] [max=N] [entity=E] [full]
//	peek-session session=S [from=SEQ] [max=N] [full]
//	counts | next-deadline | remembered-sessions
//	transfers                            the messages in transfer, by number
//	complete-transfer [fail=N:D] [claim=E:N] [gone=E:N:D] N...
//	    the target accepted these transfers (and refused N for good, with
//	    description D; claim: the forwarder may send E up to N; gone: E is
//	    deleted, nothing above N was sent to it)
//	claims                               the claims of targets, by target
//	marks                                the queue's marks of source streams
//	forget-streams [unused=D] S...       forget the marks of these streams
//	    not risen for D
//	accept-transfer stream=S             forwarded messages, one per input line:
//	    N ID [session=S]                 (its number in the stream, its id)
//	available [entity=E] [session=S]     HasAvailableSession, or HasAvailableInSession
//	snapshot                             restore a snapshot into a twin engine; from
//	    then on every command goes to both and every read reads both, and any
//	    difference fails the test
//
// A lock-token=L is the token of session L, or zeros, ones (16 bytes of
// each), none, or L[:8] (its first half). Any command may end with
// "unchanged": it then also prints whether the engine's digest stayed
// the same.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			return
		}
		s := &script{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

// script is the state a scenario builds up: the engine under test (in
// harness), the lock tokens handed out, by message id in the order they
// were handed out, and the session locks held, by session id.
type script struct {
	h        *harness
	tokens   map[string][][]byte
	sessions map[string][]byte
	// twin, once a snapshot was taken, is the engine restored from it:
	// every later command is applied to both and every read made of both,
	// and any difference fails the test.
	twin *Engine
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	a := parseArgs(t, d, d.CmdArgs)
	if d.Cmd == "queue" {
		s.newQueue(t, a)
		a.done()
		return ""
	}
	if s.h == nil {
		d.Fatalf(t, "%s before queue", d.Cmd)
	}
	s.h.t = t
	unchanged := a.flag("unchanged")
	before := s.h.e.Digest()
	out := s.directive(t, d, a)
	a.done()
	if unchanged {
		if s.h.e.Digest() == before {
			out += "state unchanged\n"
		} else {
			out += "state changed\n"
		}
	}
	return out
}

func (s *script) newQueue(t *testing.T, a *args) {
	var props *raftbusv1.QueueProperties
	if len(a.keys) > 0 || len(a.vals) > 0 {
		props = queueProps(a)
	}
	s.h = newHarness(t, props)
	s.tokens, s.sessions, s.twin = map[string][][]byte{}, map[string][]byte{}, nil
}

func queueProps(a *args) *raftbusv1.QueueProperties {
	p := &raftbusv1.QueueProperties{}
	if a.flag("requires-session") {
		p.RequiresSession = ptr(true)
	}
	if d, ok := a.duration("lock"); ok {
		p.LockDuration = dur(d)
	}
	if d, ok := a.duration("ttl"); ok {
		p.DefaultMessageTimeToLive = dur(d)
	}
	if _, ok := a.vals["max-delivery"]; ok {
		p.MaxDeliveryCount = ptr(int32(a.int("max-delivery", 0)))
	}
	if a.flag("dead-letter-on-expiry") {
		p.DeadLetteringOnMessageExpiration = ptr(true)
	}
	if v, ok := a.take("dead-letter-on-expiry"); ok {
		p.DeadLetteringOnMessageExpiration = ptr(v == "true")
	}
	if v, ok := a.take("forward-to"); ok {
		p.ForwardTo = v
	}
	if v, ok := a.take("forward-dlq-to"); ok {
		p.ForwardDeadLetteredMessagesTo = v
	}
	return p
}

func (s *script) directive(t *testing.T, d *datadriven.TestData, a *args) string {
	h := s.h
	switch d.Cmd {
	case "configure":
		var props *raftbusv1.QueueProperties
		if len(a.keys) > 0 || len(a.vals) > 0 {
			props = queueProps(a)
		}
		return s.result(s.apply(&enginev1.Command{Body: &enginev1.Command_ConfigureEntity{ConfigureEntity: &enginev1.ConfigureEntity{
			EntityPath: testQueue, Properties: props,
		}}}))
	case "leader-version":
		switch v := a.rest(); {
		case len(v) == 1 && v[0] == "current":
			h.version = nil
		case len(v) == 1:
			n, err := strconv.ParseUint(v[0], 10, 32)
			if err != nil {
				d.Fatalf(t, "version %s: %v", v[0], err)
			}
			h.version = ptr(uint32(n))
		default:
			d.Fatalf(t, "leader-version N or current")
		}
		return ""
	case "advance":
		v := a.rest()
		if len(v) != 1 {
			d.Fatalf(t, "advance D")
		}
		by, err := time.ParseDuration(v[0])
		if err != nil {
			d.Fatalf(t, "advance %s: %v", v[0], err)
		}
		h.advance(by)
		return "now=" + at(h.now) + "\n"
	case "tick":
		return s.result(s.apply(tickCmd()))
	case "send", "schedule":
		return s.send(t, d, a)
	case "cancel":
		var seqs []int64
		for _, k := range a.rest() {
			seqs = append(seqs, s.seq(t, d, k))
		}
		res := s.apply(cancelCmd(seqs...))
		if res.GetError() != nil {
			return s.result(res)
		}
		return fmt.Sprintf("cancelled %d\n", res.GetCancelScheduled().GetCancelled())
	case "receive":
		return s.receive(t, d, a)
	case "receive-deferred":
		return s.receiveDeferred(t, d, a)
	case "complete", "abandon", "dead-letter", "defer":
		return s.settle(t, d, a)
	case "renew":
		ids := a.rest()
		if len(ids) != 1 {
			d.Fatalf(t, "renew MESSAGE")
		}
		id, tok := s.optionalSessionArgs(t, d, a)
		res := s.apply(&enginev1.Command{Body: &enginev1.Command_RenewLock{RenewLock: &enginev1.RenewLock{
			EntityPath: testQueue, LockToken: s.messageToken(t, d, ids[0]), SessionId: id, SessionLockToken: tok,
		}}})
		if res.GetError() != nil {
			return s.result(res)
		}
		return "locked-until=" + at(timestampMs(res.GetRenewLock().GetLockedUntil())) + "\n"
	case "accept":
		id, _ := a.take("session")
		if n, given := a.take("session-length"); given {
			id = strings.Repeat("\x00", s.size(t, d, n, maxSessionIDLength))
		}
		res := s.apply(acceptCmd(id))
		if res.GetError() != nil {
			return s.result(res)
		}
		r := res.GetAcceptSession()
		if r.GetSessionId() == "" && r.GetLockToken() == nil {
			return "none\n"
		}
		if len(r.GetLockToken()) != 16 {
			d.Fatalf(t, "session lock token of %d bytes", len(r.GetLockToken()))
		}
		s.sessions[r.GetSessionId()] = r.GetLockToken()
		return fmt.Sprintf("accepted %s: locked-until=%s\n", r.GetSessionId(), at(timestampMs(r.GetLockedUntil())))
	case "release":
		id, tok := s.sessionArgs(t, d, a)
		return s.result(s.apply(releaseCmd(heldSessionLock{id, tok})))
	case "renew-session":
		id, tok := s.sessionArgs(t, d, a)
		res := s.apply(renewSessionCmd(heldSessionLock{id, tok}))
		if res.GetError() != nil {
			return s.result(res)
		}
		return "locked-until=" + at(timestampMs(res.GetRenewSessionLock().GetLockedUntil())) + "\n"
	case "set-state":
		id, tok := s.sessionArgs(t, d, a)
		var state []byte
		if v, ok := a.take("value"); ok {
			state = []byte(v)
		}
		if n, ok := a.take("size"); ok {
			state = make([]byte, s.size(t, d, n, MaxSessionStateBytes))
		}
		return s.result(s.apply(setStateCmd(heldSessionLock{id, tok}, state)))
	case "get-state":
		id, tok := s.sessionArgs(t, d, a)
		return s.read(func(e *Engine) string {
			st, err := e.GetSessionState(testQueue, id, tok, h.now)
			switch {
			case err != nil:
				return s.errorText(err.(*Error).Reason, err.Error())
			case st == nil:
				return "no state\n"
			}
			return fmt.Sprintf("state %q\n", st)
		})
	case "peek":
		sq := mainQueue
		if a.flag("dlq") {
			sq = deadLetter
		}
		path := testQueue
		if p, ok := a.take("entity"); ok {
			path = p
		}
		from, max, full := s.seqArg(t, d, a, "from"), a.int("max", 100), a.flag("full")
		return s.read(func(e *Engine) string {
			ms, err := e.Peek(path, sq, from, max, 0)
			s.h.log.resolve(t, e.TakeBodies())
			return s.messages(t, d, ms, err, full, false)
		})
	case "peek-session":
		id, _ := a.take("session")
		from, max, full := s.seqArg(t, d, a, "from"), a.int("max", 100), a.flag("full")
		return s.read(func(e *Engine) string {
			ms, err := e.PeekSession(testQueue, id, from, max, 0)
			s.h.log.resolve(t, e.TakeBodies())
			return s.messages(t, d, ms, err, full, false)
		})
	case "counts":
		return s.read(func(e *Engine) string {
			c, err := e.RuntimeProperties(testQueue)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			out := fmt.Sprintf("active=%d scheduled=%d deferred=%d dead-lettered=%d locked=%d sessions=%d bytes=%d",
				c.GetActiveMessageCount(), c.GetScheduledMessageCount(), c.GetDeferredMessageCount(),
				c.GetDeadLetterMessageCount(), c.GetLockedMessageCount(), c.GetSessionCount(), c.GetSizeInBytes())
			if n := c.GetTransferMessageCount(); n > 0 {
				out += fmt.Sprintf(" transfer=%d", n)
			}
			return out + "\n"
		})
	case "next-deadline":
		return s.read(func(e *Engine) string {
			if ms, ok := e.NextDeadline(); ok {
				return at(ms) + "\n"
			}
			return "none\n"
		})
	case "available":
		path := testQueue
		if p, ok := a.take("entity"); ok {
			path = p
		}
		id, inSession := a.take("session")
		return s.read(func(e *Engine) string {
			if inSession {
				return yesNo(e.HasAvailableInSession(path, id))
			}
			return yesNo(e.HasAvailableSession(path))
		})
	case "remembered-sessions":
		return s.read(func(e *Engine) string {
			return fmt.Sprintf("%d\n", len(e.entities[testQueue].main.sessions.byID))
		})
	case "transfers":
		return s.read(func(e *Engine) string {
			var b strings.Builder
			xs := e.Transfers(1000, 1<<30)
			s.h.log.resolve(t, e.TakeBodies())
			for _, x := range xs {
				fmt.Fprintf(&b, "#%d %s -> %s %s body=%q", x.Number, x.From, x.To, x.Message.GetMessageId(), x.Message.GetBody())
				if sid := x.Message.GetSessionId(); sid != "" {
					fmt.Fprintf(&b, " session=%s", sid)
				}
				props := x.Message.GetApplicationProperties()
				keys := make([]string, 0, len(props))
				for k := range props {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				for _, k := range keys {
					fmt.Fprintf(&b, " %s=%q", k, props[k].GetStringValue())
				}
				b.WriteString("\n")
			}
			if b.Len() == 0 {
				return "none\n"
			}
			return b.String()
		})
	case "complete-transfer":
		c := &enginev1.CompleteTransfer{}
		if v, ok := a.take("fail"); ok {
			num, desc, _ := strings.Cut(v, ":")
			n, err := strconv.ParseUint(num, 10, 64)
			if err != nil {
				d.Fatalf(t, "fail=N:description: %v", err)
			}
			c.Failed = append(c.Failed, &enginev1.FailedTransfer{Number: n, Description: desc})
		}
		if v, ok := a.take("claim"); ok {
			to, num, _ := strings.Cut(v, ":")
			n, err := strconv.ParseUint(num, 10, 64)
			if err != nil {
				d.Fatalf(t, "claim=E:N: %v", err)
			}
			c.Claims = append(c.Claims, &enginev1.TransferClaim{Target: to, UpTo: n})
		}
		if v, ok := a.take("gone"); ok {
			parts := strings.SplitN(v, ":", 3)
			if len(parts) != 3 {
				d.Fatalf(t, "gone=E:N:D")
			}
			n, err := strconv.ParseUint(parts[1], 10, 64)
			if err != nil {
				d.Fatalf(t, "gone=E:N:D: %v", err)
			}
			c.Gone = append(c.Gone, &enginev1.GoneTarget{Target: parts[0], SentUpTo: n, Description: parts[2]})
		}
		for _, v := range a.rest() {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				d.Fatalf(t, "transfer number %s: %v", v, err)
			}
			c.Numbers = append(c.Numbers, n)
		}
		res := s.apply(&enginev1.Command{Body: &enginev1.Command_CompleteTransfer{CompleteTransfer: c}})
		if res.GetError() != nil {
			return s.result(res)
		}
		return fmt.Sprintf("completed %d\n", res.GetCompleteTransfer().GetCompleted())
	case "accept-transfer":
		return s.acceptTransfer(t, d, a)
	case "marks":
		return s.read(func(e *Engine) string {
			ent := e.entities[testQueue]
			var b strings.Builder
			for _, st := range ent.streams() {
				m := ent.transfersIn[st]
				when := "unknown"
				if m.acceptedMs != 0 {
					when = at(m.acceptedMs)
				}
				fmt.Fprintf(&b, "%s: %d accepted=%s\n", st, m.number, when)
			}
			if b.Len() == 0 {
				return "none\n"
			}
			return b.String()
		})
	case "forget-streams":
		c := &enginev1.ForgetTransferStreams{EntityPath: testQueue}
		if v, ok := a.take("unused"); ok {
			dur, err := time.ParseDuration(v)
			if err != nil {
				d.Fatalf(t, "unused=D: %v", err)
			}
			c.UnusedForMs = dur.Milliseconds()
		}
		c.Streams = a.rest()
		res := s.apply(&enginev1.Command{Body: &enginev1.Command_ForgetTransferStreams{ForgetTransferStreams: c}})
		if res.GetError() != nil {
			return s.result(res)
		}
		return fmt.Sprintf("forgotten %d\n", res.GetForgetTransferStreams().GetForgotten())
	case "claims":
		return s.read(func(e *Engine) string {
			var b strings.Builder
			for _, to := range e.TransferTargets() {
				fmt.Fprintf(&b, "%s: claimed up to %d\n", to, e.TransferClaim(to))
			}
			if b.Len() == 0 {
				return "none\n"
			}
			return b.String()
		})
	case "snapshot":
		var buf bytes.Buffer
		if err := h.e.Snapshot(&buf); err != nil {
			d.Fatalf(t, "snapshot: %v", err)
		}
		restored := New(0, 1)
		if err := restored.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			d.Fatalf(t, "restore: %v", err)
		}
		checkInvariants(t, restored)
		s.twin = restored
		if restored.Digest() != h.e.Digest() {
			return "restored: digest differs\n"
		}
		return "restored: digest equal\n"
	}
	d.Fatalf(t, "unknown directive %s", d.Cmd)
	return ""
}

// apply applies cmd to the engine, and to its twin if there is one.
func (s *script) apply(cmd *enginev1.Command) *enginev1.Result {
	res := s.h.apply(cmd)
	if s.twin != nil {
		got := s.twin.Apply(cmd)
		checkInvariants(s.h.t, s.twin)
		if !proto.Equal(got, res) {
			s.h.t.Fatalf("%T: the restored engine gave %v, the original %v", cmd.GetBody(), got, res)
		}
		if s.twin.Digest() != s.h.e.Digest() {
			s.h.t.Fatalf("%T: the engines diverged after the snapshot", cmd.GetBody())
		}
	}
	return res
}

// read prints what f reads of the engine, after checking that its twin
// reads the same.
func (s *script) read(f func(*Engine) string) string {
	out := f(s.h.e)
	if s.twin != nil {
		if got := f(s.twin); got != out {
			s.h.t.Fatalf("the restored engine reads\n%s\nthe original\n%s", got, out)
		}
	}
	return out
}

// result prints "ok" or the error of a command.
func (s *script) result(res *enginev1.Result) string {
	if e := res.GetError(); e != nil {
		return s.errorText(e.GetReason(), e.GetMessage())
	}
	return "ok\n"
}

// errorText prints an error, with the lock tokens it names replaced by
// the names a script uses for them (id#n).
func (s *script) errorText(reason raftbusv1.ErrorReason, msg string) string {
	for id, toks := range s.tokens {
		for i, tok := range toks {
			msg = strings.ReplaceAll(msg, hex.EncodeToString(tok), fmt.Sprintf("%s#%d", id, i+1))
		}
	}
	r := strings.TrimPrefix(reason.String(), "ERROR_REASON_")
	if msg == "" {
		return "error " + r + " without a message\n"
	}
	return "error " + r + ": " + msg + "\n"
}

// send sends (or schedules) messages. With the messages given as
// arguments (ids), each is a command of its own; given as input lines
// ("id [session=S] [ttl=D] [at=T] [body=B]"), they are one command.
func (s *script) send(t *testing.T, d *datadriven.TestData, a *args) string {
	session, hasSession := a.take("session")
	var cmds [][]*raftbusv1.Message
	for _, id := range a.rest() {
		m := &raftbusv1.Message{MessageId: id, Body: []byte(id)}
		if hasSession {
			m.SessionId = session
		}
		cmds = append(cmds, []*raftbusv1.Message{m})
	}
	if d.Input != "" {
		var batch []*raftbusv1.Message
		for line := range strings.Lines(d.Input) {
			id, lineArgs, err := datadriven.ParseLine(line)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			la := parseArgs(t, d, lineArgs)
			m := &raftbusv1.Message{MessageId: id, Body: []byte(id)}
			if v, ok := la.take("session"); ok {
				m.SessionId = v
			} else if hasSession {
				m.SessionId = session
			}
			if v, ok := la.take("body"); ok {
				m.Body = []byte(v)
			}
			if ttl, ok := la.duration("ttl"); ok {
				m.TimeToLive = dur(ttl)
			}
			if when, ok := la.duration("at"); ok {
				m.ScheduledEnqueueTime = timestamp(startMs + when.Milliseconds())
			}
			la.done()
			batch = append(batch, m)
		}
		cmds = append(cmds, batch)
	}
	var out strings.Builder
	for _, msgs := range cmds {
		cmd := sendCmd(msgs...)
		if d.Cmd == "schedule" {
			cmd = scheduleCmd(msgs...)
		}
		res := s.apply(cmd)
		if res.GetError() != nil {
			out.WriteString(s.result(res))
			continue
		}
		results := res.GetSend().GetMessages()
		if d.Cmd == "schedule" {
			results = res.GetSchedule().GetMessages()
		}
		for i, r := range results {
			fmt.Fprintf(&out, "%s: seq=%d", msgs[i].GetMessageId(), r.GetSequenceNumber())
			if r.GetScheduled() {
				out.WriteString(" scheduled")
			}
			out.WriteString("\n")
		}
	}
	return out.String()
}

func (s *script) receive(t *testing.T, d *datadriven.TestData, a *args) string {
	sq, mode := s.queueArgs(a)
	n := a.int("n", 1)
	full := a.flag("full")
	id, tok := s.optionalSessionArgs(t, d, a)
	res := s.apply(&enginev1.Command{Body: &enginev1.Command_Lock{Lock: &enginev1.Lock{
		EntityPath: testQueue, SubQueue: sq, ReceiveMode: mode, MaxMessages: int32(n), SessionId: id, SessionLockToken: tok,
	}}})
	if res.GetError() != nil {
		return s.result(res)
	}
	return s.messages(t, d, res.GetLock().GetMessages(), nil, full, true)
}

func (s *script) receiveDeferred(t *testing.T, d *datadriven.TestData, a *args) string {
	sq, mode := s.queueArgs(a)
	full := a.flag("full")
	id, tok := s.optionalSessionArgs(t, d, a)
	var seqs []int64
	for _, k := range a.rest() {
		seqs = append(seqs, s.seq(t, d, k))
	}
	res := s.apply(&enginev1.Command{Body: &enginev1.Command_ReceiveDeferred{ReceiveDeferred: &enginev1.ReceiveDeferred{
		EntityPath: testQueue, SubQueue: sq, ReceiveMode: mode, SequenceNumbers: seqs, SessionId: id, SessionLockToken: tok,
	}}})
	if res.GetError() != nil {
		return s.result(res)
	}
	return s.messages(t, d, res.GetReceiveDeferred().GetMessages(), nil, full, true)
}

func (s *script) settle(t *testing.T, d *datadriven.TestData, a *args) string {
	sq, _ := s.queueArgs(a)
	ids := a.rest()
	if len(ids) != 1 {
		d.Fatalf(t, "%s MESSAGE", d.Cmd)
	}
	id, tok := s.optionalSessionArgs(t, d, a)
	c := &enginev1.Settle{
		EntityPath: testQueue, SubQueue: sq, LockToken: s.messageToken(t, d, ids[0]), SessionId: id, SessionLockToken: tok,
		Disposition: map[string]enginev1.Disposition{"complete": complete, "abandon": abandon, "dead-letter": deadLetterIt, "defer": deferIt}[d.Cmd],
	}
	c.DeadLetterReason, _ = a.take("reason")
	c.DeadLetterErrorDescription, _ = a.take("description")
	if p, ok := a.take("property"); ok {
		k, v, _ := strings.Cut(p, ":")
		c.PropertiesToModify = map[string]*raftbusv1.PropertyValue{k: {Value: &raftbusv1.PropertyValue_StringValue{StringValue: v}}}
	}
	return s.result(s.apply(&enginev1.Command{Body: &enginev1.Command_Settle{Settle: c}}))
}

// acceptTransfer applies one AcceptTransfer of the messages given as input
// lines ("number id [session=S]") to the queue.
func (s *script) acceptTransfer(t *testing.T, d *datadriven.TestData, a *args) string {
	stream, _ := a.take("stream")
	c := &enginev1.AcceptTransfer{EntityPath: testQueue, Stream: stream}
	for line := range strings.Lines(d.Input) {
		num, lineArgs, err := datadriven.ParseLine(line)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || len(lineArgs) == 0 {
			d.Fatalf(t, "want: number id [session=S]")
		}
		la := parseArgs(t, d, lineArgs[1:])
		id := lineArgs[0].Key
		m := &raftbusv1.Message{MessageId: id, Body: []byte(id)}
		if v, ok := la.take("session"); ok {
			m.SessionId = v
		}
		la.done()
		c.Messages = append(c.Messages, &enginev1.TransferredMessage{Number: n, Message: m})
	}
	res := s.apply(&enginev1.Command{Body: &enginev1.Command_AcceptTransfer{AcceptTransfer: c}})
	if res.GetError() != nil {
		return s.result(res)
	}
	var b strings.Builder
	for i, r := range res.GetAcceptTransfer().GetMessages() {
		if r.GetDuplicate() {
			fmt.Fprintf(&b, "%s: duplicate\n", c.Messages[i].GetMessage().GetMessageId())
		} else {
			fmt.Fprintf(&b, "%s: seq=%d\n", c.Messages[i].GetMessage().GetMessageId(), r.GetSequenceNumber())
		}
	}
	return b.String()
}
