package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftbus/raftbus/client"
)

const receiveUsage = `Usage:
  raftbus receive <queue | topic/subscriptions/name> [flags]

Receives up to --max messages, waiting up to --wait for the first, prints
them and settles each (PeekLock) as --settle says.

Flags:
  --max n                  most messages to receive (default 1)
  --wait d                 how long to wait for the first (default 5s)
  --mode peek-lock|receive-and-delete   (default peek-lock)
  --settle complete|abandon|dead-letter|defer|none   (default complete)
  --reason text            dead-letter reason (with --settle dead-letter)
  --dlq                    receive from the dead-letter sub-queue
  --session id             receive from this session (session entities)

Examples:
  raftbus receive orders --max 10
  raftbus receive orders --settle dead-letter --reason 'bad format'
  raftbus receive orders --dlq --mode receive-and-delete
  raftbus receive events/subscriptions/audit --output json
`

const peekUsage = `Usage:
  raftbus peek <queue | topic/subscriptions/name> [--max n] [--from seq] [--dlq]

Shows messages without locking them: active, locked, deferred and
scheduled ones.

Examples:
  raftbus peek orders --max 20
  raftbus peek orders --dlq --output json
`

// receivedJSON is a received message in JSON output.
type receivedJSON struct {
	SequenceNumber       int64          `json:"sequenceNumber"`
	MessageID            string         `json:"messageId,omitempty"`
	Body                 string         `json:"body"`
	BodyEncoding         string         `json:"bodyEncoding"`
	ContentType          string         `json:"contentType,omitempty"`
	Subject              string         `json:"subject,omitempty"`
	CorrelationID        string         `json:"correlationId,omitempty"`
	SessionID            string         `json:"sessionId,omitempty"`
	Properties           map[string]any `json:"applicationProperties,omitempty"`
	EnqueuedTime         time.Time      `json:"enqueuedTime"`
	DeliveryCount        uint32         `json:"deliveryCount"`
	State                string         `json:"state"`
	PartitionID          uint32         `json:"partitionId"`
	DeadLetterReason     string         `json:"deadLetterReason,omitempty"`
	DeadLetterDesc       string         `json:"deadLetterErrorDescription,omitempty"`
	ScheduledEnqueueTime *time.Time     `json:"scheduledEnqueueTime,omitempty"`
	Settled              string         `json:"settled,omitempty"`
}

func stateName(s client.MessageState) string {
	switch s {
	case client.MessageStateDeferred:
		return "deferred"
	case client.MessageStateScheduled:
		return "scheduled"
	}
	return "active"
}

func toJSON(m *client.ReceivedMessage, settled string) receivedJSON {
	body, enc := printableBody(m.Body)
	return receivedJSON{
		SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, Body: body, BodyEncoding: enc,
		ContentType: m.ContentType, Subject: m.Subject, CorrelationID: m.CorrelationID, SessionID: m.SessionID,
		Properties: m.ApplicationProperties, EnqueuedTime: m.EnqueuedTime, DeliveryCount: m.DeliveryCount,
		State: stateName(m.State), PartitionID: m.PartitionID, DeadLetterReason: m.DeadLetterReason,
		DeadLetterDesc: m.DeadLetterErrorDescription, ScheduledEnqueueTime: m.ScheduledEnqueueTime, Settled: settled,
	}
}

func (a *app) printMessage(m *client.ReceivedMessage, settled string) {
	body, enc := printableBody(m.Body)
	fmt.Fprintf(a.stdout, "#%d", m.SequenceNumber)
	if m.MessageID != "" {
		fmt.Fprintf(a.stdout, " id=%s", m.MessageID)
	}
	if m.SessionID != "" {
		fmt.Fprintf(a.stdout, " session=%s", m.SessionID)
	}
	fmt.Fprintf(a.stdout, " deliveries=%d enqueued=%s", m.DeliveryCount, m.EnqueuedTime.UTC().Format(time.RFC3339))
	if m.State != client.MessageStateActive {
		fmt.Fprintf(a.stdout, " state=%s", stateName(m.State))
	}
	if m.DeadLetterReason != "" {
		fmt.Fprintf(a.stdout, " reason=%q", m.DeadLetterReason)
	}
	if settled != "" {
		fmt.Fprintf(a.stdout, " [%s]", settled)
	}
	fmt.Fprintln(a.stdout)
	for k, v := range m.ApplicationProperties {
		fmt.Fprintf(a.stdout, "  %s\n", propertyText(k, v))
	}
	if enc != "text" {
		body = enc + ":" + body
	}
	fmt.Fprintf(a.stdout, "  %s\n", body)
}

// receiverFor opens a receiver of a queue or "topic/subscriptions/name".
func receiverFor(c *client.Client, path string, opts *client.ReceiverOptions) (*client.Receiver, error) {
	if topic, sub, ok := strings.Cut(path, "/subscriptions/"); ok {
		return c.NewReceiverForSubscription(topic, sub, opts)
	}
	return c.NewReceiverForQueue(path, opts)
}

func runReceive(ctx context.Context, a *app, args []string) error {
	fs := a.flags("receive")
	max := fs.Int("max", 1, "")
	wait := fs.Duration("wait", 5*time.Second, "")
	mode := fs.String("mode", "peek-lock", "")
	settle := fs.String("settle", "complete", "")
	reason := fs.String("reason", "", "")
	dlq := fs.Bool("dlq", false, "")
	session := fs.String("session", "", "")
	pos, err := a.parse(fs, args, "entity")
	if err != nil {
		return err
	}
	opts := &client.ReceiverOptions{}
	switch *mode {
	case "peek-lock":
	case "receive-and-delete":
		opts.ReceiveMode = client.ReceiveModeReceiveAndDelete
		*settle = "none"
	default:
		return usagef("--mode is peek-lock or receive-and-delete, not %q", *mode)
	}
	switch *settle {
	case "complete", "abandon", "dead-letter", "defer", "none":
	default:
		return usagef("--settle is complete, abandon, dead-letter, defer or none, not %q", *settle)
	}
	if *dlq {
		opts.SubQueue = client.SubQueueDeadLetter
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, a.timeout+*wait)
	defer cancel()
	var r *client.Receiver
	if *session != "" {
		sr, err := acceptSession(ctx, c, pos[0], *session, opts.ReceiveMode)
		if err != nil {
			return err
		}
		defer sr.Close(context.WithoutCancel(ctx))
		r = sr.Receiver
	} else if r, err = receiverFor(c, pos[0], opts); err != nil {
		return err
	}
	msgs, err := r.ReceiveMessages(ctx, *max, &client.ReceiveMessagesOptions{MaxWaitTime: *wait})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	out := []receivedJSON{}
	for _, m := range msgs {
		settled := *settle
		var serr error
		switch *settle {
		case "complete":
			serr = r.CompleteMessage(ctx, m, nil)
			settled = "completed"
		case "abandon":
			serr = r.AbandonMessage(ctx, m, nil)
			settled = "abandoned"
		case "dead-letter":
			serr = r.DeadLetterMessage(ctx, m, &client.DeadLetterOptions{Reason: reason})
			settled = "dead-lettered"
		case "defer":
			serr = r.DeferMessage(ctx, m, nil)
			settled = "deferred"
		case "none":
			settled = ""
			if opts.ReceiveMode == client.ReceiveModePeekLock {
				settled = "locked until " + m.LockedUntil.UTC().Format(time.RFC3339)
			}
		}
		if serr != nil {
			return fmt.Errorf("settle message %d: %w", m.SequenceNumber, serr)
		}
		if a.output == "json" {
			out = append(out, toJSON(m, settled))
		} else {
			a.printMessage(m, settled)
		}
	}
	if a.output == "json" {
		return a.printJSON(out)
	}
	if len(msgs) == 0 {
		fmt.Fprintf(a.stderr, "no message arrived within %v\n", *wait)
	}
	return nil
}

func acceptSession(ctx context.Context, c *client.Client, path, id string, mode client.ReceiveMode) (*client.SessionReceiver, error) {
	opts := &client.SessionReceiverOptions{ReceiveMode: mode}
	if topic, sub, ok := strings.Cut(path, "/subscriptions/"); ok {
		return c.AcceptSessionForSubscription(ctx, topic, sub, id, opts)
	}
	return c.AcceptSessionForQueue(ctx, path, id, opts)
}

func runPeek(ctx context.Context, a *app, args []string) error {
	fs := a.flags("peek")
	max := fs.Int("max", 10, "")
	from := fs.Int64("from", 0, "")
	dlq := fs.Bool("dlq", false, "")
	pos, err := a.parse(fs, args, "entity")
	if err != nil {
		return err
	}
	opts := &client.ReceiverOptions{}
	if *dlq {
		opts.SubQueue = client.SubQueueDeadLetter
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := receiverFor(c, pos[0], opts)
	if err != nil {
		return err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	msgs, err := r.PeekMessages(ctx, *max, &client.PeekMessagesOptions{FromSequenceNumber: from})
	if err != nil {
		return err
	}
	if a.output == "json" {
		out := []receivedJSON{}
		for _, m := range msgs {
			out = append(out, toJSON(m, ""))
		}
		return a.printJSON(out)
	}
	for _, m := range msgs {
		a.printMessage(m, "")
	}
	if len(msgs) == 0 {
		fmt.Fprintln(a.stderr, "no messages")
	}
	return nil
}
