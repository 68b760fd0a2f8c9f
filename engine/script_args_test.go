package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// What the scripts of TestScripts share: reading a directive's arguments
// and printing the engine's answers.

// args are a directive's arguments; a handler takes those it knows, and
// any left over fail the test, so that a misspelt argument is not
// silently ignored.
type args struct {
	t    *testing.T
	d    *datadriven.TestData
	keys []string // bare arguments (message ids, sequence numbers), in order
	vals map[string]string
}

func parseArgs(t *testing.T, d *datadriven.TestData, cmdArgs []datadriven.CmdArg) *args {
	a := &args{t: t, d: d, vals: map[string]string{}}
	for _, arg := range cmdArgs {
		switch len(arg.Vals) {
		case 0:
			a.keys = append(a.keys, arg.Key)
		case 1:
			a.vals[arg.Key] = arg.Vals[0]
		default:
			d.Fatalf(t, "argument %s: one value expected", arg)
		}
	}
	return a
}

// flag takes a bare argument.
func (a *args) flag(name string) bool {
	i := slices.Index(a.keys, name)
	if i < 0 {
		return false
	}
	a.keys = slices.Delete(a.keys, i, i+1)
	return true
}

// take takes a key=value argument.
func (a *args) take(name string) (string, bool) {
	v, ok := a.vals[name]
	delete(a.vals, name)
	return v, ok
}

func (a *args) int(name string, def int) int {
	v, ok := a.take(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		a.d.Fatalf(a.t, "%s=%s: %v", name, v, err)
	}
	return n
}

func (a *args) duration(name string) (time.Duration, bool) {
	v, ok := a.take(name)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		a.d.Fatalf(a.t, "%s=%s: %v", name, v, err)
	}
	return d, true
}

// rest takes the remaining bare arguments.
func (a *args) rest() []string {
	k := a.keys
	a.keys = nil
	return k
}

// done fails the test if an argument was not taken.
func (a *args) done() {
	if len(a.keys) > 0 || len(a.vals) > 0 {
		a.d.Fatalf(a.t, "unknown arguments %v %v", a.keys, a.vals)
	}
}

// queueArgs takes "dlq" (the dead-letter sub-queue) and "delete"
// (receive and delete).
func (s *script) queueArgs(a *args) (raftbusv1.SubQueue, raftbusv1.ReceiveMode) {
	sq, mode := mainQueue, peekLock
	if a.flag("dlq") {
		sq = deadLetter
	}
	if a.flag("delete") {
		mode = receiveDel
	}
	return sq, mode
}

// optionalSessionArgs takes session=ID and lock-token=T, if given.
func (s *script) optionalSessionArgs(t *testing.T, d *datadriven.TestData, a *args) (string, []byte) {
	_, hasSession := a.vals["session"]
	_, hasToken := a.vals["lock-token"]
	if !hasSession && !hasToken {
		return "", nil
	}
	return s.sessionArgs(t, d, a)
}

// sessionArgs takes session=ID and lock-token=T: the token of the session
// lock held on T, or on ID when not given. T may also be zeros, ones
// (16 bytes of each), none (no token), or NAME[:8] (the first half of
// one).
func (s *script) sessionArgs(t *testing.T, d *datadriven.TestData, a *args) (string, []byte) {
	id, _ := a.take("session")
	name, ok := a.take("lock-token")
	if !ok {
		name = id
	}
	switch name {
	case "zeros":
		return id, make([]byte, 16)
	case "ones":
		return id, bytes.Repeat([]byte{1}, 16)
	case "none":
		return id, nil
	}
	half := strings.HasSuffix(name, "[:8]")
	tok, held := s.sessions[strings.TrimSuffix(name, "[:8]")]
	if !held {
		d.Fatalf(t, "no session lock held on %q", name)
	}
	if half {
		tok = tok[:8]
	}
	return id, tok
}

// messageToken is the lock token of a message by id: the last handed out
// for it, or with id#n, the n-th.
func (s *script) messageToken(t *testing.T, d *datadriven.TestData, ref string) []byte {
	id, nth, hasNth := strings.Cut(ref, "#")
	toks := s.tokens[id]
	if len(toks) == 0 {
		d.Fatalf(t, "no lock token of %s", id)
	}
	if !hasNth {
		return toks[len(toks)-1]
	}
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 || n > len(toks) {
		d.Fatalf(t, "%s: %d lock tokens of %s", ref, len(toks), id)
	}
	return toks[n-1]
}

func (s *script) seq(t *testing.T, d *datadriven.TestData, v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.Fatalf(t, "sequence number %s: %v", v, err)
	}
	return n
}

func (s *script) seqArg(t *testing.T, d *datadriven.TestData, a *args, name string) int64 {
	v, ok := a.take(name)
	if !ok {
		return 0
	}
	return s.seq(t, d, v)
}

// size reads N, max or max+1, where max is the limit.
func (s *script) size(t *testing.T, d *datadriven.TestData, v string, max int) int {
	switch v {
	case "max":
		return max
	case "max+1":
		return max + 1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		d.Fatalf(t, "size %s: %v", v, err)
	}
	return n
}

// messages prints received or peeked messages, one a line, and with
// record, keeps their lock tokens.
func (s *script) messages(t *testing.T, d *datadriven.TestData, ms []*raftbusv1.ReceivedMessage, err error, full, record bool) string {
	if err != nil {
		return s.errorText(err.(*Error).Reason, err.Error())
	}
	if len(ms) == 0 {
		return "none\n"
	}
	var out strings.Builder
	for _, m := range ms {
		id := m.GetMessage().GetMessageId()
		fmt.Fprintf(&out, "%s seq=%d", id, m.GetSequenceNumber())
		if full || m.GetEnqueuedSequenceNumber() != m.GetSequenceNumber() {
			fmt.Fprintf(&out, " enqueued-seq=%d", m.GetEnqueuedSequenceNumber())
		}
		fmt.Fprintf(&out, " delivery=%d %s", m.GetDeliveryCount(),
			strings.ToLower(strings.TrimPrefix(m.GetState().String(), "MESSAGE_STATE_")))
		if tok := m.GetLockToken(); len(tok) > 0 {
			if len(tok) != 16 {
				d.Fatalf(t, "%s: lock token of %d bytes", id, len(tok))
			}
			fmt.Fprintf(&out, " locked-until=%s", at(timestampMs(m.GetLockedUntil())))
			if record {
				s.tokens[id] = append(s.tokens[id], tok)
			}
		} else if m.GetLockedUntil() != nil {
			fmt.Fprintf(&out, " locked-until=%s without a lock token", at(timestampMs(m.GetLockedUntil())))
		}
		if full {
			fmt.Fprintf(&out, " enqueued=%s", at(timestampMs(m.GetEnqueuedTime())))
			if m.GetExpiresAt() != nil {
				fmt.Fprintf(&out, " expires=%s", at(timestampMs(m.GetExpiresAt())))
			}
			fmt.Fprintf(&out, " body=%q", m.GetMessage().GetBody())
			props := m.GetMessage().GetApplicationProperties()
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range props {
					if !yield(k) {
						return
					}
				}
			}) {
				fmt.Fprintf(&out, " property=%s:%q", k, props[k].GetStringValue())
			}
		}
		if r := m.GetDeadLetterReason(); r != "" {
			fmt.Fprintf(&out, " dead-letter-reason=%s", r)
		}
		if full && m.GetDeadLetterSource() != "" {
			fmt.Fprintf(&out, " description=%q source=%s", m.GetDeadLetterErrorDescription(), m.GetDeadLetterSource())
		}
		out.WriteString("\n")
	}
	return out.String()
}

// at prints a time as its distance from the scenario's start.
func at(ms int64) string { return (time.Duration(ms-startMs) * time.Millisecond).String() }

func yesNo(b bool) string {
	if b {
		return "yes\n"
	}
	return "no\n"
}
