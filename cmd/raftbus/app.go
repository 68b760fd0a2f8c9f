package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/client/admin"
	"github.com/raftbus/raftbus/internal/certs"
)

const usage = `raftbus is the command-line client of a raftbus cluster.

Usage:
  raftbus <command> [arguments] [flags]

Entities:
  queue         create|get|update|delete|list queues
  topic         create|get|update|delete|list topics
  subscription  create|get|update|delete|list subscriptions of a topic
  rule          create|get|update|delete|list rules of a subscription

Messages:
  send          send a message (body from an argument, a file or stdin)
  receive       receive messages and settle them
  peek          look at messages without locking them
  schedule      schedule a message for later; prints its sequence number
  cancel        cancel scheduled messages by sequence number

Cluster:
  status        nodes, partitions, leaders and message counts
  node          list, drain, undrain or remove nodes
  auth          create|list|regenerate|delete shared access policies
  bench         measure throughput and latency against the cluster

Flags every command takes:
  --server host:port[,host:port]  nodes to connect to (env RAFTBUS_ADDR,
                                  default 127.0.0.1:7400)
  --output text|json              output format (default text); JSON
                                  names are camelCase in every command,
                                  entities and counts in protobuf's JSON
                                  form (an unlimited duration is the
                                  longest, 9223372036.854775807s)
  --timeout duration              give up after this long (default 30s)
  --tls-ca file                   connect with TLS, verifying the nodes
                                  against this CA certificate (env
                                  RAFTBUS_TLS_CA)
  --tls-cert file, --tls-key file this client's certificate and key, for
                                  a cluster with TLS (env RAFTBUS_TLS_CERT,
                                  RAFTBUS_TLS_KEY)
  --connection-string s           sign calls with a policy's key, for a
                                  cluster started with --auth:
                                  Endpoint=sb://host:port/;SharedAccessKeyName=..;
                                  SharedAccessKey=.. (env
                                  RAFTBUS_CONNECTION_STRING); its endpoint
                                  stands for --server

Examples:
  raftbus queue create orders --partitions 3
  raftbus send orders 'hello' --property region=eu
  raftbus receive orders --max 10
  raftbus status --output json

Run 'raftbus <command> --help' for a command's flags and examples.
`

// app is one invocation: the streams and common settings of a command.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	server  string
	output  string
	timeout time.Duration
	tls     certs.Files
	// connectionString, when set, signs every call (and names the
	// servers).
	connectionString string
}

// command is one subcommand: its usage text and what it does.
type command struct {
	usage string
	run   func(ctx context.Context, a *app, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"queue":        {queueUsage, queueKind.run},
		"topic":        {topicUsage, topicKind.run},
		"subscription": {subscriptionUsage, subscriptionKind.run},
		"rule":         {ruleUsage, ruleKind.run},
		"send":         {sendUsage, runSend},
		"receive":      {receiveUsage, runReceive},
		"peek":         {peekUsage, runPeek},
		"schedule":     {scheduleUsage, runSchedule},
		"cancel":       {cancelUsage, runCancel},
		"status":       {statusUsage, runStatus},
		"node":         {nodeUsage, runNode},
		"auth":         {authUsage, runAuth},
		"bench":        {benchUsage, runBench},
	}
}

// run is the CLI's entry: it returns the process exit code (0 success,
// 1 failure, 2 usage error).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "raftbus: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd.run(ctx, a, args[1:])
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, cmd.usage)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "raftbus %s: %v\n\n%s", args[0], err, cmd.usage)
		return 2
	}
	fmt.Fprintf(stderr, "raftbus %s: %s\n", args[0], describe(err))
	return 1
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// describe turns an error into advice where there is some.
func describe(err error) string {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	msg := ce.Message
	switch ce.Code {
	case client.CodeOutcomeUnknown:
		msg += " (the change may or may not have happened)"
	case client.CodeUnspecified:
		if ce.Status != codes.OK && ce.Status != codes.Unknown {
			msg = ce.Status.String() + ": " + msg
		}
	case client.CodeServerBusy:
		switch {
		case strings.Contains(msg, "server preface") || strings.Contains(msg, "handshake"):
			msg += " (does the cluster use TLS? set --tls-ca, and --tls-cert and --tls-key, or RAFTBUS_TLS_CA, ...)"
		case strings.HasPrefix(msg, "node unreachable"):
			msg += " (is raftbusd running? set --server or RAFTBUS_ADDR)"
		default:
			msg = ce.Code.String() + ": " + msg
		}
	default:
		msg = ce.Code.String() + ": " + msg
	}
	if ce.TrackingID != "" {
		msg += " [tracking id " + ce.TrackingID + "]"
	}
	return msg
}

// flags makes a flag set with the common flags.
func (a *app) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv("RAFTBUS_ADDR")
	if def == "" {
		def = client.DefaultAddress
	}
	fs.StringVar(&a.server, "server", def, "")
	fs.StringVar(&a.output, "output", "text", "")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "")
	fs.StringVar(&a.tls.CA, "tls-ca", os.Getenv("RAFTBUS_TLS_CA"), "")
	fs.StringVar(&a.tls.Cert, "tls-cert", os.Getenv("RAFTBUS_TLS_CERT"), "")
	fs.StringVar(&a.tls.Key, "tls-key", os.Getenv("RAFTBUS_TLS_KEY"), "")
	fs.StringVar(&a.connectionString, "connection-string", os.Getenv("RAFTBUS_CONNECTION_STRING"), "")
	return fs
}

// parse parses flags anywhere among the positional arguments and checks
// their count.
func (a *app) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if a.output != "text" && a.output != "json" {
		return nil, usagef("--output is text or json, not %q", a.output)
	}
	if positional != nil && len(pos) != len(positional) {
		return nil, usagef("want %d argument(s) (%s), got %d", len(positional), strings.Join(positional, " "), len(pos))
	}
	return pos, nil
}

func (a *app) client() (*client.Client, error) {
	opts, err := a.clientOptions()
	if err != nil {
		return nil, err
	}
	if a.connectionString != "" {
		if opts == nil {
			opts = &client.ClientOptions{}
		}
		c, err := client.NewClientFromConnectionString(a.connectionString, opts)
		if err != nil {
			return nil, usagef("--connection-string: %v", err)
		}
		return c, nil
	}
	return client.New(strings.Split(a.server, ","), opts)
}

func (a *app) admin() (*admin.Client, error) {
	opts, err := a.clientOptions()
	if err != nil {
		return nil, err
	}
	if a.connectionString != "" {
		ad, err := admin.NewFromConnectionString(a.connectionString, opts)
		if err != nil {
			return nil, usagef("--connection-string: %v", err)
		}
		return ad, nil
	}
	return admin.New(strings.Split(a.server, ","), opts)
}

// clientOptions are the SDK's options for the common flags: TLS when a
// CA or a certificate is given.
func (a *app) clientOptions() (*client.ClientOptions, error) {
	if a.tls.Empty() {
		return nil, nil
	}
	c, err := certs.LoadClient(a.tls)
	if err != nil {
		return nil, usagef("TLS: %v", err)
	}
	return &client.ClientOptions{TLSConfig: c}, nil
}

func (a *app) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// printJSON writes v as indented JSON; proto messages in their canonical
// JSON form.
func (a *app) printJSON(v any) error {
	if m, ok := v.(proto.Message); ok {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(a.stdout, string(b))
		return err
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printProtoList writes a list of proto messages as a JSON array.
func printProtoList[T proto.Message](a *app, items []T) error {
	parts := make([]json.RawMessage, 0, len(items))
	for _, m := range items {
		b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			return err
		}
		parts = append(parts, b)
	}
	return a.printJSON(parts)
}

// table writes rows under a header, aligned.
func (a *app) table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
}

// unlimitedDuration is the JSON form of the longest duration, which an
// entity's settings use for "unlimited" (a time to live without end).
var unlimitedDuration = func() string {
	b, _ := protojson.Marshal(durationpb.New(math.MaxInt64))
	return strings.Trim(string(b), `"`)
}()

// printFields writes a proto message as "name: value" lines; an unlimited
// duration reads "unlimited" ("never" for auto_delete_on_idle).
func (a *app) printFields(m proto.Message) error {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		v := fields[k]
		if s, ok := v.(string); ok {
			if s == unlimitedDuration {
				s = "unlimited"
				if k == "autoDeleteOnIdle" {
					s = "never"
				}
			}
			fmt.Fprintf(w, "%s:\t%s\n", k, s)
			continue
		}
		j, _ := json.Marshal(v)
		fmt.Fprintf(w, "%s:\t%s\n", k, j)
	}
	return w.Flush()
}

// rawProto is a proto message in its JSON form, for embedding in other
// JSON output.
func rawProto(m proto.Message) json.RawMessage {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}
