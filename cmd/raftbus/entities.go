package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client/admin"
)

const queueUsage = `Usage:
  raftbus queue create <name> [settings]
  raftbus queue update <name> [settings]   changes only the settings given
  raftbus queue get <name>
  raftbus queue delete <name>
  raftbus queue list

Settings:
  --partitions n              partition count (fixed at creation)
  --lock-duration d           PeekLock duration, e.g. 30s (default 1m)
  --max-delivery-count n      deliveries before dead-lettering (default 10)
  --requires-session          messages need a session id (fixed at creation)
  --duplicate-detection       drop repeated message ids (fixed at creation)
  --duplicate-window d        how long message ids are remembered
  --ttl d                     default message time to live
  --dead-letter-on-expiration dead-letter expired messages
  --max-size-mb n             capacity of the queue
  --max-message-size-kb n     largest accepted message
  --forward-to name           forward accepted messages
  --forward-dead-letters-to name
  --auto-delete-on-idle d     delete the queue once unused this long (at
                              least 5m; "never" turns it off)

Examples:
  raftbus queue create orders --partitions 3 --lock-duration 30s
  raftbus queue update orders --max-delivery-count 5
  raftbus queue list --output json
`

// entitySettings are the setting flags of queues, topics and
// subscriptions; each entity kind uses the ones it has.
type entitySettings struct {
	fs                        *flag.FlagSet
	partitions, maxDelivery   int
	lock, ttl, dupWindow      time.Duration
	session, dup, dlqOnExpiry bool
	maxSizeMB, maxMessageKB   int64
	forwardTo, forwardDLQTo   string
	autoDelete                *durationpb.Duration
}

func newEntitySettings(fs *flag.FlagSet) *entitySettings {
	s := &entitySettings{fs: fs}
	fs.IntVar(&s.partitions, "partitions", 0, "")
	fs.IntVar(&s.maxDelivery, "max-delivery-count", 0, "")
	fs.DurationVar(&s.lock, "lock-duration", 0, "")
	fs.DurationVar(&s.ttl, "ttl", 0, "")
	fs.DurationVar(&s.dupWindow, "duplicate-window", 0, "")
	fs.BoolVar(&s.session, "requires-session", false, "")
	fs.BoolVar(&s.dup, "duplicate-detection", false, "")
	fs.BoolVar(&s.dlqOnExpiry, "dead-letter-on-expiration", false, "")
	fs.Int64Var(&s.maxSizeMB, "max-size-mb", 0, "")
	fs.Int64Var(&s.maxMessageKB, "max-message-size-kb", 0, "")
	fs.StringVar(&s.forwardTo, "forward-to", "", "")
	fs.StringVar(&s.forwardDLQTo, "forward-dead-letters-to", "", "")
	fs.Func("auto-delete-on-idle", "", func(v string) error {
		if v == "never" {
			s.autoDelete = durationpb.New(math.MaxInt64)
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf(`a duration such as 10m or 24h, or "never": %w`, err)
		}
		s.autoDelete = durationpb.New(d)
		return nil
	})
	return s
}

// set tells which flags the user gave.
func (s *entitySettings) set() map[string]bool {
	m := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

func (s *entitySettings) queue() *admin.QueueProperties {
	q := &admin.QueueProperties{}
	set := s.set()
	if set["partitions"] {
		q.PartitionCount = proto.Uint32(uint32(s.partitions))
	}
	if set["max-delivery-count"] {
		q.MaxDeliveryCount = proto.Int32(int32(s.maxDelivery))
	}
	if set["lock-duration"] {
		q.LockDuration = durationpb.New(s.lock)
	}
	if set["ttl"] {
		q.DefaultMessageTimeToLive = durationpb.New(s.ttl)
	}
	if set["duplicate-window"] {
		q.DuplicateDetectionHistoryTimeWindow = durationpb.New(s.dupWindow)
	}
	if set["requires-session"] {
		q.RequiresSession = proto.Bool(s.session)
	}
	if set["duplicate-detection"] {
		q.RequiresDuplicateDetection = proto.Bool(s.dup)
	}
	if set["dead-letter-on-expiration"] {
		q.DeadLetteringOnMessageExpiration = proto.Bool(s.dlqOnExpiry)
	}
	if set["max-size-mb"] {
		q.MaxSizeInMegabytes = proto.Int64(s.maxSizeMB)
	}
	if set["max-message-size-kb"] {
		q.MaxMessageSizeInKilobytes = proto.Int64(s.maxMessageKB)
	}
	q.ForwardTo, q.ForwardDeadLetteredMessagesTo = s.forwardTo, s.forwardDLQTo
	q.AutoDeleteOnIdle = s.autoDelete
	return q
}

func (s *entitySettings) topic() *admin.TopicProperties {
	q := s.queue()
	return &admin.TopicProperties{
		DefaultMessageTimeToLive: q.DefaultMessageTimeToLive, RequiresDuplicateDetection: q.RequiresDuplicateDetection,
		DuplicateDetectionHistoryTimeWindow: q.DuplicateDetectionHistoryTimeWindow, MaxSizeInMegabytes: q.MaxSizeInMegabytes,
		MaxMessageSizeInKilobytes: q.MaxMessageSizeInKilobytes, PartitionCount: q.PartitionCount,
		AutoDeleteOnIdle: q.AutoDeleteOnIdle,
	}
}

func (s *entitySettings) subscription() *admin.SubscriptionProperties {
	q := s.queue()
	return &admin.SubscriptionProperties{
		LockDuration: q.LockDuration, MaxDeliveryCount: q.MaxDeliveryCount, RequiresSession: q.RequiresSession,
		DefaultMessageTimeToLive: q.DefaultMessageTimeToLive, DeadLetteringOnMessageExpiration: q.DeadLetteringOnMessageExpiration,
		ForwardTo: q.ForwardTo, ForwardDeadLetteredMessagesTo: q.ForwardDeadLetteredMessagesTo,
		AutoDeleteOnIdle: q.AutoDeleteOnIdle,
	}
}

// adminCall is an entity command ready to run: its action, the positional
// arguments the action names, an admin client and the call's context.
type adminCall struct {
	verb string
	pos  []string
	ad   *admin.Client
	ctx  context.Context
	done func()
}

// adminCommand starts a create, update, get, delete or list command on an
// entity kind: it splits off the action, parses the flags flags sets up
// and the positional arguments (the parents, then the entity's name except
// for list), and connects. The caller calls done.
func (a *app) adminCommand(ctx context.Context, kind string, args []string, parents []string, flags func(*flag.FlagSet)) (*adminCall, error) {
	v, args, err := verb(args)
	if err != nil {
		return nil, err
	}
	fs := a.flags(kind + " " + v)
	if flags != nil {
		flags(fs)
	}
	names := append(parents[:len(parents):len(parents)], "name")
	switch v {
	case "create", "update", "get", "delete":
	case "list":
		names = parents
	default:
		return nil, usagef("unknown action %q", v)
	}
	pos, err := a.parse(fs, args, names...)
	if err != nil {
		return nil, err
	}
	ad, err := a.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.withTimeout(ctx)
	return &adminCall{verb: v, pos: pos, ad: ad, ctx: ctx, done: func() {
		cancel()
		ad.Close()
	}}, nil
}

// verb splits "<verb> args..." off a command line.
func verb(args []string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, usagef("missing action")
	}
	if args[0] == "-h" || args[0] == "--help" {
		return "", nil, flag.ErrHelp
	}
	return args[0], args[1:], nil
}

// queueKind is the queue command. Its get also prints the queue's
// message counts.
var queueKind = adminKind{
	name:  "queue",
	label: func(pos []string) string { return pos[0] },
	flags: func(fs *flag.FlagSet) adminActions {
		settings := newEntitySettings(fs)
		return adminActions{
			create:   func(c *adminCall) (proto.Message, error) { return c.ad.CreateQueue(c.ctx, c.pos[0], settings.queue()) },
			update:   func(c *adminCall) (proto.Message, error) { return c.ad.UpdateQueue(c.ctx, c.pos[0], settings.queue()) },
			describe: describeQueue,
			delete:   func(c *adminCall) error { return c.ad.DeleteQueue(c.ctx, c.pos[0]) },
			header:   []string{"NAME", "PARTITIONS", "LOCK", "MAX DELIVERIES", "SESSIONS", "DEDUP"},
			list: func(c *adminCall) ([]proto.Message, [][]string, error) {
				qs, err := c.ad.ListQueues(c.ctx)
				return listed(qs, err, func(q *admin.QueueProperties) []string {
					return []string{q.GetName(), fmt.Sprint(q.GetPartitionCount()), q.GetLockDuration().AsDuration().String(),
						fmt.Sprint(q.GetMaxDeliveryCount()), yesNo(q.GetRequiresSession()), yesNo(q.GetRequiresDuplicateDetection())}
				})
			},
		}
	},
}

// describeQueue prints a queue's settings and its message counts.
func describeQueue(a *app, c *adminCall) error {
	q, err := c.ad.GetQueue(c.ctx, c.pos[0])
	if err != nil {
		return err
	}
	rt, err := c.ad.GetQueueRuntimeProperties(c.ctx, c.pos[0])
	if err != nil {
		return err
	}
	if a.output == "json" {
		return a.printJSON(map[string]any{"queue": rawProto(q), "runtime": rawProto(rt)})
	}
	if err := a.printFields(q); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "messages: active %d, scheduled %d, deferred %d, dead-lettered %d, locked %d, in transfer %d\n",
		rt.GetActiveMessageCount(), rt.GetScheduledMessageCount(), rt.GetDeferredMessageCount(), rt.GetDeadLetterMessageCount(),
		rt.GetLockedMessageCount(), rt.GetTransferMessageCount())
	return nil
}

// adminKind is one kind of entity the admin commands manage (queue,
// topic, subscription, rule): how its entities are named on the command
// line and in what the commands print, and what each action calls. Every
// kind runs the same path (run), so the actions behave and print alike.
type adminKind struct {
	name string
	// parents name the positional arguments before the entity's own name
	// (a subscription's topic).
	parents []string
	// label is how the output names the entity of pos.
	label func(pos []string) string
	// flags sets up the kind's flags on fs and returns its actions, which
	// read them once parsed.
	flags func(fs *flag.FlagSet) adminActions
}

// adminActions are the calls behind a kind's actions, made with the
// command's admin client and context; its pos holds the parents' names,
// then the entity's (for list, the parents' only).
type adminActions struct {
	create, update func(c *adminCall) (proto.Message, error)
	get            func(c *adminCall) (proto.Message, error)
	// describe, when set, prints what get shows in its own way.
	describe func(a *app, c *adminCall) error
	delete   func(c *adminCall) error
	// list returns the entities, and the rows of the table that shows
	// them under header.
	list   func(c *adminCall) ([]proto.Message, [][]string, error)
	header []string
}

// listed turns what a list call returned into list's results.
func listed[T proto.Message](items []T, err error, row func(T) []string) ([]proto.Message, [][]string, error) {
	if err != nil {
		return nil, nil, err
	}
	ms := make([]proto.Message, 0, len(items))
	var rows [][]string
	for _, m := range items {
		ms = append(ms, m)
		rows = append(rows, row(m))
	}
	return ms, rows, nil
}

// run runs a create, update, get, delete or list command of the kind.
func (k adminKind) run(ctx context.Context, a *app, args []string) error {
	var do adminActions
	c, err := a.adminCommand(ctx, k.name, args, k.parents, func(fs *flag.FlagSet) { do = k.flags(fs) })
	if err != nil {
		return err
	}
	defer c.done()
	switch c.verb {
	case "create":
		m, err := do.create(c)
		return a.show(m, err, "created "+k.name+" "+k.label(c.pos))
	case "update":
		m, err := do.update(c)
		return a.show(m, err, "updated "+k.name+" "+k.label(c.pos))
	case "get":
		if do.describe != nil {
			return do.describe(a, c)
		}
		m, err := do.get(c)
		return a.show(m, err, k.name+" "+k.label(c.pos))
	case "delete":
		if err := do.delete(c); err != nil {
			return err
		}
		label := k.label(c.pos)
		return a.done("deleted "+k.name+" "+label, map[string]string{"deleted": label})
	}
	items, rows, err := do.list(c)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return printProtoList(a, items)
	}
	a.table(do.header, rows)
	return nil
}

// show prints an entity a call returned, or its error.
func (a *app) show(m proto.Message, err error, text string) error {
	if err != nil {
		return err
	}
	if a.output == "json" {
		return a.printJSON(m)
	}
	fmt.Fprintln(a.stdout, text)
	return a.printFields(m)
}

// done reports a change without a result.
func (a *app) done(text string, v any) error {
	if a.output == "json" {
		return a.printJSON(v)
	}
	_, err := fmt.Fprintln(a.stdout, text)
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
