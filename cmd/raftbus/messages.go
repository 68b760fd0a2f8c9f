package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/raftbus/raftbus/client"
)

const sendUsage = `Usage:
  raftbus send <queue-or-topic> [body] [flags]

The body is the argument, else the file given with --file, else stdin.

Flags:
  --file path            read the body from a file ('-' for stdin)
  --property k=v         an application property (repeatable); typed with
                         k:int=5, k:float=1.5, k:bool=true, k:time=RFC3339;
                         exact number types: int8, int16, int32, int64,
                         uint8, uint16, uint32, uint64, float32, float64
  --message-id id        enables safe retries and duplicate detection
  --session id           the session id
  --partition-key key
  --content-type type
  --subject s
  --correlation-id id
  --ttl d                time to live
  --schedule-at time     RFC 3339 time to enqueue at
  --schedule-in d        enqueue after this long
  --count n              send n copies (pipelined), showing progress

Examples:
  raftbus send orders 'hello'
  echo '{"id":1}' | raftbus send orders --content-type application/json --property region=eu
  raftbus send orders --file order.json --session customer-7
  raftbus send orders 'later' --schedule-in 10m
`

const scheduleUsage = `Usage:
  raftbus schedule <queue-or-topic> [body] (--at time | --in d) [send flags]

Prints the sequence number, for 'raftbus cancel'.

Examples:
  raftbus schedule orders 'reminder' --in 1h
  raftbus schedule orders --file x.json --at 2030-01-01T00:00:00Z
`

const cancelUsage = `Usage:
  raftbus cancel <queue-or-topic> <sequence-number>...

Examples:
  raftbus cancel orders 42 43
`

// messageFlags are the flags that describe a message to send.
type messageFlags struct {
	file, id, session, partitionKey, contentType, subject, correlation string
	ttl                                                                time.Duration
	props                                                              multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// flagSet is the part of *flag.FlagSet the message flags need.
type flagSet interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
	Var(value flag.Value, name, usage string)
}

// message builds the message from the flags, the body argument or the
// file or stdin.
func (a *app) message(mf *messageFlags, bodyArgs []string) (*client.Message, error) {
	var body []byte
	switch {
	case len(bodyArgs) > 1:
		return nil, usagef("one body argument at most (quote it)")
	case len(bodyArgs) == 1:
		body = []byte(bodyArgs[0])
	case mf.file != "" && mf.file != "-":
		b, err := os.ReadFile(mf.file)
		if err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
		body = b
	default:
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return nil, fmt.Errorf("read body from stdin: %w", err)
		}
		body = b
	}
	m := &client.Message{
		MessageID: mf.id, Body: body, SessionID: mf.session, PartitionKey: mf.partitionKey,
		ContentType: mf.contentType, Subject: mf.subject, CorrelationID: mf.correlation,
	}
	if mf.ttl > 0 {
		m.TimeToLive = &mf.ttl
	}
	props, err := parseProperties(mf.props)
	if err != nil {
		return nil, err
	}
	m.ApplicationProperties = props
	return m, nil
}

func parseProperties(specs []string) (map[string]any, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := map[string]any{}
	for _, spec := range specs {
		key, val, ok := strings.Cut(spec, "=")
		if !ok || key == "" {
			return nil, usagef("property %q: want key=value", spec)
		}
		name, typ, typed := strings.Cut(key, ":")
		if !typed {
			out[name] = val
			continue
		}
		var v any
		var err error
		switch typ {
		case "string":
			v = val
		case "int", "int64":
			v, err = strconv.ParseInt(val, 10, 64)
		case "int32", "int16", "int8":
			v, err = parseSized(val, typ)
		case "uint64":
			v, err = strconv.ParseUint(val, 10, 64)
		case "uint32", "uint16", "uint8":
			v, err = parseSized(val, typ)
		case "float", "float64":
			v, err = strconv.ParseFloat(val, 64)
		case "float32":
			var f float64
			f, err = strconv.ParseFloat(val, 32)
			v = float32(f)
		case "bool":
			v, err = strconv.ParseBool(val)
		case "time":
			v, err = time.Parse(time.RFC3339Nano, val)
		default:
			return nil, usagef("property %q: type %q is not string, int, float, bool, time or an exact number type", spec, typ)
		}
		if err != nil {
			return nil, usagef("property %q: %v", spec, err)
		}
		out[name] = v
	}
	return out, nil
}

// parseSized parses an integer of one of the narrower types, and returns it
// with that Go type.
func parseSized(val, typ string) (any, error) {
	switch typ {
	case "int32":
		i, err := strconv.ParseInt(val, 10, 32)
		return int32(i), err
	case "int16":
		i, err := strconv.ParseInt(val, 10, 16)
		return int16(i), err
	case "int8":
		i, err := strconv.ParseInt(val, 10, 8)
		return int8(i), err
	case "uint32":
		u, err := strconv.ParseUint(val, 10, 32)
		return uint32(u), err
	case "uint16":
		u, err := strconv.ParseUint(val, 10, 16)
		return uint16(u), err
	}
	u, err := strconv.ParseUint(val, 10, 8)
	return uint8(u), err
}

// propertyText prints a property value, naming its type when it is one of
// the exact number types (so that k:int32: 5 reads as it was sent).
func propertyText(name string, v any) string {
	switch v.(type) {
	case int8, int16, int32, uint8, uint16, uint32, uint64, float32:
		return fmt.Sprintf("%s:%T: %v", name, v, v)
	}
	return fmt.Sprintf("%s: %v", name, v)
}

func runSend(ctx context.Context, a *app, args []string) error {
	fs := a.flags("send")
	var mf messageFlags
	registerMessageFlags(fs, &mf)
	at := fs.String("schedule-at", "", "")
	in := fs.Duration("schedule-in", 0, "")
	count := fs.Int("count", 1, "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing queue or topic")
	}
	m, err := a.message(&mf, pos[1:])
	if err != nil {
		return err
	}
	when, err := scheduleTime(*at, *in)
	if err != nil {
		return err
	}
	m.ScheduledEnqueueTime = when
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewSender(pos[0], nil)
	if err != nil {
		return err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	if *count <= 1 {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			return err
		}
		return a.done(fmt.Sprintf("sent %d bytes to %s", len(m.Body), pos[0]), map[string]any{"sent": 1, "entity": pos[0]})
	}
	return a.sendMany(ctx, s, m, *count, pos[0])
}

// sendMany sends n copies in batches of pipelined sends, printing progress
// to stderr.
func (a *app) sendMany(ctx context.Context, s *client.Sender, m *client.Message, n int, entity string) error {
	const chunk = 256
	start := time.Now()
	for sent := 0; sent < n; {
		k := min(chunk, n-sent)
		msgs := make([]*client.Message, k)
		for i := range msgs {
			cp := *m
			if m.MessageID != "" {
				cp.MessageID = fmt.Sprintf("%s-%d", m.MessageID, sent+i)
			}
			msgs[i] = &cp
		}
		if err := s.SendMessages(ctx, msgs); err != nil {
			return fmt.Errorf("after %d sent: %w", sent, err)
		}
		sent += k
		fmt.Fprintf(a.stderr, "\rsent %d/%d", sent, n)
	}
	fmt.Fprintln(a.stderr)
	d := time.Since(start)
	return a.done(fmt.Sprintf("sent %d messages to %s in %v (%.0f/s)", n, entity, d.Round(time.Millisecond), float64(n)/d.Seconds()),
		map[string]any{"sent": n, "entity": entity, "seconds": d.Seconds()})
}

func registerMessageFlags(fs flagSet, mf *messageFlags) {
	fs.StringVar(&mf.file, "file", "", "")
	fs.StringVar(&mf.id, "message-id", "", "")
	fs.StringVar(&mf.session, "session", "", "")
	fs.StringVar(&mf.partitionKey, "partition-key", "", "")
	fs.StringVar(&mf.contentType, "content-type", "", "")
	fs.StringVar(&mf.subject, "subject", "", "")
	fs.StringVar(&mf.correlation, "correlation-id", "", "")
	fs.DurationVar(&mf.ttl, "ttl", 0, "")
	fs.Var(&mf.props, "property", "")
}

func scheduleTime(at string, in time.Duration) (*time.Time, error) {
	switch {
	case at != "" && in != 0:
		return nil, usagef("give --schedule-at or --schedule-in, not both")
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return nil, usagef("schedule time %q is not RFC 3339 (2030-01-02T15:04:05Z)", at)
		}
		return &t, nil
	case in != 0:
		t := time.Now().Add(in)
		return &t, nil
	}
	return nil, nil
}

func runSchedule(ctx context.Context, a *app, args []string) error {
	fs := a.flags("schedule")
	var mf messageFlags
	registerMessageFlags(fs, &mf)
	at := fs.String("at", "", "")
	in := fs.Duration("in", 0, "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing queue or topic")
	}
	when, err := scheduleTime(*at, *in)
	if err != nil {
		return err
	}
	if when == nil {
		return usagef("give the time: --at or --in")
	}
	m, err := a.message(&mf, pos[1:])
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewSender(pos[0], nil)
	if err != nil {
		return err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	seqs, err := s.ScheduleMessages(ctx, []*client.Message{m}, *when, nil)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return a.printJSON(map[string]any{"sequenceNumbers": seqs, "scheduledEnqueueTime": when.UTC()})
	}
	fmt.Fprintf(a.stdout, "scheduled for %s: sequence number %d\n", when.UTC().Format(time.RFC3339), seqs[0])
	return nil
}

func runCancel(ctx context.Context, a *app, args []string) error {
	fs := a.flags("cancel")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want the entity and at least one sequence number")
	}
	var seqs []int64
	for _, s := range pos[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return usagef("sequence number %q is not a number", s)
		}
		seqs = append(seqs, n)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewSender(pos[0], nil)
	if err != nil {
		return err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	if err := s.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		return err
	}
	return a.done(fmt.Sprintf("cancelled %d scheduled message(s)", len(seqs)), map[string]any{"cancelled": seqs})
}

// printableBody shows a body as text when it is UTF-8, else as base64.
func printableBody(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "text"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}
